// Package suggest finds the word a user most likely meant: the "did you
// mean" of the master and runner command lines.
package suggest

// MaxDistance is the largest edit distance a suggestion may have.
const MaxDistance = 2

// Closest returns the candidate nearest to word by edit distance
// (Levenshtein, an adjacent swap counting once), or "" when none is within
// MaxDistance, or within a third of word's length for words of fewer than
// six letters (so "x" does not suggest "tail"). Ties go to the candidate
// listed first. A candidate that word is a prefix of (at least three
// letters long) is taken when it is the only one.
func Closest(word string, candidates []string) string {
	best, bestD := "", MaxDistance+1
	limit := MaxDistance
	if n := len([]rune(word)); n < 6 {
		limit = max(1, n/3)
	}
	for _, c := range candidates {
		if d := distance(word, c); d < bestD && d <= limit {
			best, bestD = c, d
		}
	}
	if best != "" || len(word) < 3 {
		return best
	}
	for _, c := range candidates {
		if len(c) > len(word) && c[:len(word)] == word {
			if best != "" {
				return "" // Ambiguous.
			}
			best = c
		}
	}
	return best
}

// distance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and swaps of adjacent runes.
func distance(a, b string) int {
	s, t := []rune(a), []rune(b)
	prev2 := make([]int, len(t)+1)
	prev := make([]int, len(t)+1)
	cur := make([]int, len(t)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(s); i++ {
		cur[0] = i
		for j := 1; j <= len(t); j++ {
			cost := 1
			if s[i-1] == t[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && s[i-1] == t[j-2] && s[i-2] == t[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(t)]
}
