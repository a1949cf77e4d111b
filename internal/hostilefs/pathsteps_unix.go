//go:build unix

package hostilefs

// PathSteps resolves the absolute path abs as the kernel would
// ([WalkPath]) and returns every directory whose entry it looks up and
// every symbolic link it follows, with what abs resolves to. It is a
// snapshot: the caller decides whether those who control the steps
// (their owners; for a directory, group or others when it is writable to
// them and not sticky) are trusted, and opens abs afterwards.
func PathSteps(abs string) (steps []PathStep, resolved string, err error) {
	resolved, err = WalkPath(abs, func(s PathStep) error {
		steps = append(steps, s)
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return steps, resolved, nil
}
