package cli

// The tests call the table's readers (completion, the help, the overview)
// without Main, which builds it in a run.
func init() { loadVerbs() }
