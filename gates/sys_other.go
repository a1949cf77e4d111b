//go:build !unix

package gates

// Open flags: platforms without O_NONBLOCK rely on the Stat check before
// opening and on the fstat check after.
const (
	oNonblock  = 0
	oDirectory = 0
)
