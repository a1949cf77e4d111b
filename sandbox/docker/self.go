package docker

import (
	"debug/elf"
	"os"
	"path/filepath"
	"runtime"
	"sync"
)

// SelfAgent is this executable when it can run in any Linux image (a
// static ELF for this architecture, as `make build` makes it): persistent
// docker sandboxes then run it as their agent. "" otherwise: they run the
// sh agent in the image's /bin/sh (a few process starts more per command;
// the same isolation).
var SelfAgent = sync.OnceValue(func() string {
	if runtime.GOOS != "linux" {
		return ""
	}
	self, err := os.Executable()
	if err != nil {
		return ""
	}
	if self, err = filepath.EvalSymlinks(self); err != nil {
		return ""
	}
	f, err := elf.Open(self)
	if err != nil {
		return ""
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			return ""
		}
	}
	return self
})
