package docker

// A StageError is a staging directory of protected paths (see
// [PruneStaging]) that could not be removed, and why.
type StageError struct {
	Path string
	Err  error
}

func (e *StageError) Error() string { return e.Path + ": " + e.Err.Error() }
func (e *StageError) Unwrap() error { return e.Err }
