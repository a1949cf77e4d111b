package mailbox

import (
	"fmt"
	"strings"
	"sync"
)

// MaxNameLen is the longest gate name accepted.
const MaxNameLen = 64

// MaxIDLen is the longest call id accepted.
const MaxIDLen = 128

// ValidID reports whether id is acceptable as a call id: 1–128 bytes of
// [A-Za-z0-9_.-], not starting with a dot.
func ValidID(id string) bool {
	if id == "" || len(id) > MaxIDLen || id[0] == '.' {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// ParseAck reports whether name is the acknowledgement calls/<id>.done of
// a valid id, and returns the id.
func ParseAck(name string) (id string, ok bool) {
	id, ok = strings.CutSuffix(name, AckSuffix)
	return id, ok && ValidID(id)
}

// NameError explains why a gate name cannot be used.
type NameError struct {
	Name   string
	Reason string
}

func (e *NameError) Error() string {
	return fmt.Sprintf("invalid gate name %q: %s", e.Name, e.Reason)
}

// ValidateName reports whether name can be a gate: a safe file name that
// every supported shell (dash, bash, busybox sh) would look up through PATH.
// It refuses shell keywords, shell builtins, the utilities the wrapper itself
// runs, and busybox applets (busybox sh runs its applet instead of PATH).
func ValidateName(name string) error {
	if name == "" {
		return &NameError{name, "empty"}
	}
	if len(name) > MaxNameLen {
		return &NameError{truncName(name), fmt.Sprintf("longer than %d bytes", MaxNameLen)}
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' ||
			i > 0 && (c == '-' || c == '.' || c == '+')
		if !ok {
			return &NameError{name, "use letters, digits and _ (and - . + after the first character)"}
		}
	}
	if why, bad := reserved()[name]; bad {
		return &NameError{name, why}
	}
	return nil
}

func truncName(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// reserved maps the names no gate may take to the reason.
var reserved = sync.OnceValue(func() map[string]string {
	reserved := map[string]string{}
	add := func(list, why string) {
		for _, w := range strings.Fields(list) {
			if _, ok := reserved[w]; !ok {
				reserved[w] = why
			}
		}
	}
	add(`case coproc do done elif else esac fi for function if in select then time until while`,
		"it is a shell keyword, so no shell would run it as a command")
	add(`alias bg bind break builtin caller cd chdir command compgen complete compopt continue
declare dirs disown echo enable eval exec exit export false fc fg getopts hash help history
jobs kill let local logout mapfile popd printf pushd pwd read readarray readonly return set
shift shopt source suspend test times trap true type typeset ulimit umask unalias unset wait`,
		"it is a shell builtin, so the shell would run its builtin instead of the gate")
	add(`cat mkdir mkfifo sleep sh`,
		"the wrapper itself runs this utility; a gate of the same name would shadow it")
	add(busyboxApplets,
		"busybox sh runs its built-in applet of that name instead of looking in PATH")
	return reserved
})

// busyboxApplets is `busybox --list` of Debian's busybox-static 1.35.
const busyboxApplets = `
[ [[ acpid adjtimex ar arch arp arping ascii ash awk base64 basename bc blkdiscard blockdev brctl 
bunzip2 busybox bzcat bzip2 cal cat chgrp chmod chown chroot chvt clear cmp cp cpio crc32 crond 
crontab cttyhack cut date dc dd deallocvt depmod devmem df diff dirname dmesg dnsdomainname 
dos2unix dpkg dpkg-deb du dumpkmap dumpleases echo ed egrep env expand expr factor fallocate false 
fatattr fdisk fgrep find findfs fold free freeramdisk fsfreeze fstrim ftpget ftpput getopt getty 
grep groups gunzip gzip halt head hexdump hostid hostname httpd hwclock i2cdetect i2cdump i2cget 
i2cset i2ctransfer id ifconfig ifdown ifup init insmod ionice ip ipcalc ipneigh kill killall klogd 
last less link linux32 linux64 linuxrc ln loadfont loadkmap logger login logname logread losetup ls 
lsmod lsscsi lzcat lzma lzop md5sum mdev microcom mim mkdir mkdosfs mke2fs mkfifo mknod mkpasswd 
mkswap mktemp modinfo modprobe more mount mt mv nameif nc netstat nl nologin nproc nsenter nslookup 
nuke od openvt partprobe passwd paste patch pidof ping ping6 pivot_root poweroff printf ps pwd 
rdate readlink realpath reboot renice reset resume rev rm rmdir rmmod route rpm rpm2cpio run-init 
run-parts sed seq setkeycodes setpriv setsid sh sha1sum sha256sum sha3sum sha512sum shred shuf 
sleep sort ssl_client start-stop-daemon stat strings stty su sulogin svc svok swapoff swapon 
switch_root sync sysctl syslogd tac tail tar taskset tc tee telnet telnetd test tftp time timeout 
top touch tr traceroute traceroute6 true truncate ts tty tunctl ubirename udhcpc udhcpd uevent 
umount uname uncompress unexpand uniq unix2dos unlink unlzma unshare unxz unzip uptime usleep 
uudecode uuencode vconfig vi w watch watchdog wc wget which who whoami xargs xxd xz xzcat yes zcat `
