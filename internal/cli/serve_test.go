package cli

import (
	"context"
	"syscall"
	"testing"
	"time"
)

func TestAddr(t *testing.T) {
	// An IPv6 host needs brackets, which is why this is not host+":"+port.
	want := map[string]string{"127.0.0.1": "127.0.0.1:8000", "::1": "[::1]:8000"}
	for host, w := range want {
		if got := Addr(host, 8000); got != w {
			t.Errorf("Addr(%q, 8000) = %q, want %q", host, got, w)
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
