package clidoc

import (
	"fmt"
	"strings"
)

// Markdown renders p as a Markdown reference page.
func (p Page) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "<!-- %s -->\n\n", p.Source)
	fmt.Fprintf(&b, "# `%s`: %s\n\n", p.Name, p.Summary)
	b.WriteString("```\n")
	for _, s := range p.Synopsis {
		fmt.Fprintf(&b, "%s %s\n", p.Name, s)
	}
	b.WriteString("```\n\n")
	mdText(&b, p.About)
	if len(p.Commands) > 0 {
		b.WriteString("## Commands\n\n| command | what it does |\n|---|---|\n")
		for _, c := range p.Commands {
			fmt.Fprintf(&b, "| [`%s %s`](#%s) | %s |\n", p.Name, c.Name, anchor(p.Name+" "+c.Name), mdCell(c.Summary))
		}
		b.WriteString("\n")
	}
	if len(p.Flags) > 0 {
		b.WriteString("## Flags\n\n")
		mdFlags(&b, p.Flags)
	}
	if len(p.Exit) > 0 {
		b.WriteString("## Exit codes\n\n| code | meaning |\n|---|---|\n")
		for _, e := range p.Exit {
			fmt.Fprintf(&b, "| %d | %s |\n", e.Code, mdCell(e.Meaning))
		}
		b.WriteString("\n")
	}
	if len(p.Env) > 0 {
		b.WriteString("## Environment\n\n| variable | meaning |\n|---|---|\n")
		for _, e := range p.Env {
			fmt.Fprintf(&b, "| `%s` | %s |\n", e.Name, mdCell(e.Meaning))
		}
		b.WriteString("\n")
	}
	for _, c := range p.Commands {
		fmt.Fprintf(&b, "## %s %s\n\n```\n%s %s %s\n```\n\n", p.Name, c.Name, p.Name, c.Name, c.Synopsis)
		if c.Ref != "" {
			fmt.Fprintf(&b, "%s\n\n", c.Ref)
		}
		mdText(&b, c.About)
		if len(c.Flags) > 0 {
			mdFlags(&b, c.Flags)
		}
	}
	if len(p.SeeAlso) > 0 {
		fmt.Fprintf(&b, "## See also\n\n%s\n", strings.Join(p.SeeAlso, ", "))
	}
	return b.String()
}

// anchor is the id GitHub gives a heading of text.
func anchor(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}

func mdText(b *strings.Builder, text string) {
	paras, pre := blocks(text)
	for i, p := range paras {
		if pre[i] {
			fmt.Fprintf(b, "```\n%s\n```\n\n", p)
			continue
		}
		fmt.Fprintf(b, "%s\n\n", mdEscape(p))
	}
}

func mdFlags(b *strings.Builder, flags []Flag) {
	b.WriteString("| flag | default | meaning |\n|---|---|---|\n")
	for _, f := range flags {
		name := dashes(f.Name) + f.Name
		if f.Arg != "" {
			name += " " + f.Arg
		}
		def := ""
		if f.Default != "" {
			def = "`" + f.Default + "`"
		}
		fmt.Fprintf(b, "| `%s` | %s | %s |\n", name, def, mdCell(f.Usage))
	}
	b.WriteString("\n")
}

// mdEscape keeps text from being read as Markdown markup where it would
// change what is shown: a leading '#', '<' and '*'.
func mdEscape(s string) string {
	r := strings.NewReplacer("<", "&lt;", "*", "\\*")
	lines := strings.Split(r.Replace(s), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "#") || strings.HasPrefix(l, "- ") || strings.HasPrefix(l, "+ ") {
			lines[i] = "\\" + l
		}
	}
	return strings.Join(lines, "\n")
}

// mdCell is s on one line of a table.
func mdCell(s string) string {
	return strings.ReplaceAll(mdEscape(strings.Join(strings.Fields(s), " ")), "|", "\\|")
}

// Man renders p as a man page (man(7) macros) of section 1, version
// naming the release it documents.
func (p Page) Man(version string) string {
	var b strings.Builder
	fmt.Fprintf(&b, ".\\\" %s\n", p.Source)
	fmt.Fprintf(&b, ".TH %s 1 \"\" \"SkillPilot %s\" \"SkillPilot Manual\"\n", strings.ToUpper(p.Name), version)
	fmt.Fprintf(&b, ".SH NAME\n%s \\- %s\n", p.Name, roff(p.Summary))
	b.WriteString(".SH SYNOPSIS\n")
	for i, s := range p.Synopsis {
		if i > 0 {
			b.WriteString(".br\n")
		}
		fmt.Fprintf(&b, ".B %s\n%s\n", p.Name, roff(s))
	}
	b.WriteString(".SH DESCRIPTION\n")
	manText(&b, p.About)
	if len(p.Flags) > 0 {
		b.WriteString(".SH OPTIONS\n")
		manFlags(&b, p.Flags)
	}
	if len(p.Commands) > 0 {
		b.WriteString(".SH COMMANDS\n")
		for _, c := range p.Commands {
			fmt.Fprintf(&b, ".SS %s %s\n.B %s %s\n%s\n.PP\n", p.Name, roff(c.Name), p.Name, roff(c.Name), roff(c.Synopsis))
			if c.Ref != "" {
				fmt.Fprintf(&b, "%s\n.PP\n", roff(c.Ref))
			}
			manText(&b, c.About)
			manFlags(&b, c.Flags)
		}
	}
	if len(p.Exit) > 0 {
		b.WriteString(".SH EXIT STATUS\n")
		for _, e := range p.Exit {
			fmt.Fprintf(&b, ".TP\n.B %d\n%s\n", e.Code, roff(e.Meaning))
		}
	}
	if len(p.Env) > 0 {
		b.WriteString(".SH ENVIRONMENT\n")
		for _, e := range p.Env {
			fmt.Fprintf(&b, ".TP\n.B %s\n%s\n", e.Name, roff(e.Meaning))
		}
	}
	if len(p.SeeAlso) > 0 {
		fmt.Fprintf(&b, ".SH SEE ALSO\n%s\n", roff(strings.Join(p.SeeAlso, ", ")))
	}
	return b.String()
}

func manText(b *strings.Builder, text string) {
	paras, pre := blocks(text)
	for i, p := range paras {
		if pre[i] {
			fmt.Fprintf(b, ".PP\n.nf\n%s\n.fi\n", roff(p))
			continue
		}
		fmt.Fprintf(b, ".PP\n%s\n", roff(p))
	}
}

func manFlags(b *strings.Builder, flags []Flag) {
	for _, f := range flags {
		fmt.Fprintf(b, ".TP\n.B %s", roff(dashes(f.Name)+f.Name))
		if f.Arg != "" {
			fmt.Fprintf(b, " \\fI%s\\fR", roff(f.Arg))
		}
		b.WriteString("\n" + roff(strings.Join(strings.Fields(f.Usage), " ")))
		if f.Default != "" {
			fmt.Fprintf(b, " (default: %s)", roff(f.Default))
		}
		b.WriteString("\n")
	}
}

// roff escapes text for a man page: backslashes, minus signs (so that
// flags copy as typed), and a line starting with a control character.
func roff(s string) string {
	s = strings.NewReplacer(`\`, `\e`, "-", `\-`).Replace(s)
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, ".") || strings.HasPrefix(l, "'") {
			lines[i] = `\&` + l
		}
	}
	return strings.Join(lines, "\n")
}

// dashes is how a flag is spelled: -f, -o (as the usage lines write
// one-letter flags), --session.
func dashes(name string) string {
	if len(name) == 1 {
		return "-"
	}
	return "--"
}
