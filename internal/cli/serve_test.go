package cli

import (
	"context"
	"syscall"
	"testing"
	"time"
)

func TestAddr(t *testing.T) {
	for _, c := range []struct {
		host string
		port int
		want string
	}{{"127.0.0.1", 8000, "127.0.0.1:8000"}, {"::1", 0, "[::1]:0"}} {
		if got := Addr(c.host, c.port); got != c.want {
			t.Errorf("Addr(%q, %d) = %q, want %q", c.host, c.port, got, c.want)
		}
	}
}

func TestUntilSignalEndsOnSIGTERM(t *testing.T) {
	//lint:ignore SA1012 cobra hands commands a nil Context when none was set; UntilSignal must accept it
	ctx, stop := UntilSignal(nil)
	defer stop()
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("context not done 5s after SIGTERM")
	}
}

func TestUntilSignalEndsWithParent(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	ctx, stop := UntilSignal(parent)
	defer stop()
	cancel()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("context not done after its parent was cancelled")
	}
}
