package httpapi_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/httpapi"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/wserr"
)

// TestNewRefusesNegativeLimits: a negative limit is store.invalid_options
// naming the field, never the default; zero is the default, and the
// timeouts and MaxTransfers whose negative values mean something keep
// them.
func TestNewRefusesNegativeLimits(t *testing.T) {
	b := httpapi.FromStore(storetest.OpenStore(t))
	for name, opts := range map[string]httpapi.Options{
		"MaxRequestBytes": {MaxRequestBytes: -1},
		"MaxUploadBytes":  {MaxUploadBytes: -1},
		"BusyDeadline":    {BusyDeadline: -time.Second},
		"FollowPoll":      {FollowPoll: -time.Millisecond},
		"MaxWait":         {MaxWait: -time.Second},
		"Heartbeat":       {Heartbeat: -time.Second},
	} {
		t.Run("Err"+name, func(t *testing.T) {
			h, err := httpapi.New(b, opts)
			assert.Nil(t, h)
			require.Error(t, err)
			assert.Equal(t, wserr.InvalidOptions, wserr.CodeOf(err), "%v", err)
			assert.ErrorContains(t, err, "Options."+name+" is -")
		})
	}
	for name, opts := range map[string]httpapi.Options{
		"Defaults":  {},
		"Negatives": {IOTimeout: -1, ReadIOTimeout: -1, WriteIOTimeout: -1, MaxTransfers: -1},
	} {
		t.Run("OK/"+name, func(t *testing.T) {
			h, err := httpapi.New(b, opts)
			require.NoError(t, err)
			h.Close()
		})
	}
}
