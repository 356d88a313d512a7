//go:build unix

package release

import (
	"os"
	"syscall"
)

// lockFile takes f's exclusive advisory lock, which the exporter and
// the release command both take around an append.
func lockFile(f *os.File) (unlock func(), err error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	op := func(how int) (err error) {
		if cerr := rc.Control(func(fd uintptr) {
			for {
				if err = syscall.Flock(int(fd), how); err != syscall.EINTR {
					return
				}
			}
		}); cerr != nil {
			return cerr
		}
		return err
	}
	if err := op(syscall.LOCK_EX); err != nil {
		return nil, err
	}
	return func() { _ = op(syscall.LOCK_UN) }, nil
}
