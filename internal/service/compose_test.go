package service_test

import (
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/service"
)

// composeStopMargin is the least time compose.yaml's stop_grace_period must
// leave beyond the shutdown's own bound, for what that bound does not
// count: the signal's delivery, closing the pool, the process's exit, and
// a busy host.
const composeStopMargin = 5 * time.Second

// TestCompose checks compose.yaml, the deployment the README offers,
// against the shutdown the code performs.
func TestCompose(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		service types.ServiceConfig
	}

	setup := func(t *testing.T) *testBundle {
		t.Helper()
		// Loaded the way `docker compose up` loads it, with the secrets'
		// variables set as the README asks and nothing else of this
		// process's environment.
		opts, err := cli.NewProjectOptions([]string{filepath.Join("..", "..", "compose.yaml")},
			cli.WithEnv([]string{"PG_PASSWORD=pg-secret", "UI_PASSWORD=ui-secret"}),
			cli.WithWorkingDirectory(filepath.Join("..", "..")),
		)
		require.NoError(t, err)
		project, err := opts.LoadProject(t.Context())
		require.NoError(t, err)
		svc, err := project.GetService("mailfathom")
		require.NoError(t, err)
		return &testBundle{service: svc}
	}

	// serviceConfig loads MailFathom's configuration from the service's
	// environment, exactly as serve in the container would.
	serviceConfig := func(t *testing.T, svc types.ServiceConfig) *config.Config {
		t.Helper()
		var environ []string
		for k, v := range svc.Environment {
			require.NotNil(t, v, "%s is taken from the host's environment; compose.yaml sets every MAILFATHOM_ variable itself", k)
			environ = append(environ, k+"="+*v)
		}
		sort.Strings(environ)
		cfg, err := config.Load(environ)
		require.NoError(t, err, "the service's environment:\n%s", strings.Join(environ, "\n"))
		return cfg
	}

	t.Run("StopGracePeriodOutlastsShutdown", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)

		cfg := serviceConfig(t, bundle.service)
		drain := cfg.Sync.ShutdownDrainTimeout
		bound := service.ShutdownBound(drain)
		require.Equal(t, drain+jobqueue.HardStopBound+service.HTTPShutdownBound, bound)

		require.NotNil(t, bundle.service.StopGracePeriod,
			"compose.yaml sets no stop_grace_period, so Compose kills serve 10s after SIGTERM, before its shutdown bound %v", bound)
		grace := time.Duration(*bundle.service.StopGracePeriod)
		require.GreaterOrEqual(t, grace, bound+composeStopMargin,
			"stop_grace_period %v must cover the drain %v, the hard stop %v, the HTTP shutdown %v and a margin of %v",
			grace, drain, jobqueue.HardStopBound, service.HTTPShutdownBound, composeStopMargin)
	})

	// /metrics and the probes answer without a password, so the service
	// is published on the host's loopback unless an operator chooses
	// otherwise.
	t.Run("PublishesOnLoopbackOnly", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)
		require.NotEmpty(t, bundle.service.Ports)
		for _, p := range bundle.service.Ports {
			require.Equal(t, "127.0.0.1", p.HostIP, "port %s is published on every interface", p.Published)
		}
	})

	t.Run("SendsTheSignalServeDrainsOn", func(t *testing.T) {
		t.Parallel()
		bundle := setup(t)

		// serve drains on SIGTERM, Compose's default, and on SIGINT; any
		// other stop signal would end it without a drain.
		require.Contains(t, []string{"", "SIGTERM", "SIGINT"}, bundle.service.StopSignal)
	})
}
