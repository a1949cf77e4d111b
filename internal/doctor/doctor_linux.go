package doctor

import (
	"errors"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// fsCheck classifies the filesystem dir (or its nearest existing parent)
// lives on.
func fsCheck(check, dir string) Finding {
	p := dir
	var st unix.Statfs_t
	for {
		err := unix.Statfs(p, &st)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.ENOENT) || filepath.Dir(p) == p {
			return Finding{Check: check + " filesystem", Status: statusWarn,
				Detail: "cannot statfs " + dir + ": " + err.Error()}
		}
		p = filepath.Dir(p)
	}
	return fsResult(check, dir, classifyFS(int64(st.Type)))
}

// wakeCheck proves FIFO semantics under dir (whether they reach into a
// backend's sandbox is the backend's doctor finding): mkfifo works, a non-blocking
// writer with no reader gets ENXIO (no hang), and a byte written with a
// reader present arrives.
func wakeCheck(dir string) Finding {
	c := Finding{Check: "wake"}
	tmp, err := os.MkdirTemp(dir, "gb-doctor-")
	if err != nil {
		c.Status, c.Detail = statusProblem, "cannot create a temp dir in "+dir+": "+err.Error()
		c.Hint = "bridge.session_dir must be a writable directory"
		return c
	}
	defer os.RemoveAll(tmp)
	fifo := filepath.Join(tmp, "wake")
	poll := func(why string) Finding {
		c.Status = statusWarn
		c.Detail = "FIFO wake-ups do not work in " + dir + " (" + why + "); wrappers poll for responses (slower calls)"
		c.Hint = "put sessions on a local filesystem with bridge.session_dir"
		return c
	}
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		return poll("mkfifo: " + err.Error())
	}
	fd, err := unix.Open(fifo, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == nil {
		unix.Close(fd)
		return poll("a writer with no reader did not get ENXIO")
	}
	if !errors.Is(err, unix.ENXIO) {
		return poll("open for write: " + err.Error())
	}
	r, err := unix.Open(fifo, unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return poll("open read-write: " + err.Error())
	}
	defer unix.Close(r)
	w, err := unix.Open(fifo, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return poll("open for write with a reader: " + err.Error())
	}
	_, werr := unix.Write(w, []byte{1})
	unix.Close(w)
	buf := make([]byte, 1)
	n, rerr := unix.Read(r, buf)
	if werr != nil || rerr != nil || n != 1 {
		return poll("a byte written did not arrive")
	}
	c.Status = statusOK
	c.Detail = "FIFO in " + dir + ": no reader gives ENXIO (no hang), a byte wakes the reader"
	return c
}
