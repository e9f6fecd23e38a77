package broker

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
)

// pulsar-admin's reset-cursor --messageId with -e (exclude-reset-position)
// starts reading after the given message, and expire-messages --position
// acknowledges up to and including it (with -e, up to the one before); both
// send Pulsar's ResetCursorData body ({ledgerId, entryId, isExcluded, ...}).
func TestAdminResetCursorExcludedAndExpireByPosition(t *testing.T) {
	env := startAdminBroker(t, testLedgers(t, 0), false)
	const name = "persistent://public/default/adm-reset-expire"
	tn := topicName(t, name)
	client := newClient(t, env.url)
	ids := sendN(t, newProducer(t, client, name, pulsar.ProducerOptions{DisableBatching: true}), 10)
	subs := env.admin.Subscriptions()
	backlog := func() int64 {
		t.Helper()
		st, err := env.admin.Topics().GetStats(tn)
		if err != nil {
			t.Fatal(err)
		}
		return st.Subscriptions["s"].MsgBacklog
	}
	postAt := func(path string, ledger, entry int64, excluded bool, want int) string {
		t.Helper()
		body := fmt.Sprintf(`{"ledgerId":%d,"entryId":%d,"partitionIndex":-1,"batchIndex":-1,"isExcluded":%v}`,
			ledger, entry, excluded)
		resp, err := http.Post(env.web+"/admin/v2/persistent/public/default/adm-reset-expire/subscription/s/"+path,
			"application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("POST %s %s: %d %s, want %d", path, body, resp.StatusCode, out, want)
		}
		return string(out)
	}
	post := func(path string, id pulsar.MessageID, excluded bool, want int) {
		t.Helper()
		postAt(path, id.LedgerID(), id.EntryID(), excluded, want)
	}
	if err := subs.Create(tn, "s", utils.Earliest); err != nil {
		t.Fatal(err)
	}

	post("resetcursor", ids[3], false, http.StatusNoContent)
	if b := backlog(); b != 7 {
		t.Fatalf("reset to message 3: backlog %d, want 7 (3 is read next)", b)
	}
	post("resetcursor", ids[3], true, http.StatusNoContent)
	if b := backlog(); b != 6 {
		t.Fatalf("reset to message 3, excluded: backlog %d, want 6 (4 is read next)", b)
	}
	post("resetcursor", ids[9], true, http.StatusNoContent)
	if b := backlog(); b != 0 {
		t.Fatalf("reset past the last message: backlog %d, want 0", b)
	}

	post("resetcursor", ids[0], false, http.StatusNoContent)
	post("expireMessages", ids[4], false, http.StatusNoContent)
	if b := backlog(); b != 5 {
		t.Fatalf("expire up to message 4: backlog %d, want 5", b)
	}
	post("resetcursor", ids[0], false, http.StatusNoContent)
	post("expireMessages", ids[4], true, http.StatusNoContent)
	if b := backlog(); b != 6 {
		t.Fatalf("expire up to message 4, excluded: backlog %d, want 6", b)
	}
	post("expireMessages", ids[2], false, http.StatusNoContent) // behind the cursor: nothing moves
	if b := backlog(); b != 6 {
		t.Fatalf("expire behind the cursor: backlog %d, want 6", b)
	}
	if out := postAt("expireMessages", ids[9].LedgerID()+100, 0, false, http.StatusBadRequest); !strings.Contains(out, "after the topic's last entry") {
		t.Fatalf("expire past the end: %s", out)
	}
}
