package probe_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every probe's connections and every fake engine end with its test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
