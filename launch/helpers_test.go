package launch

import (
	"regexp"
	"testing"

	"github.com/skillpilot/skillpilot/internal/launchtest"
)

// TestMain puts this test binary on the PATH as "runner" (launchtest.Main).
func TestMain(m *testing.M) { launchtest.Main(m) }

var (
	startRunner = launchtest.StartRunner
	ctx         = launchtest.Ctx
)

func regexpMust(s string) *regexp.Regexp { return regexp.MustCompile(s) }
