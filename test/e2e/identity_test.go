package e2e

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"
)

// runningUIDs lists the pod UIDs of a pod name's running containers (with
// how many run for each).
func (a *agent) runningUIDs(pod string) map[string]int {
	out := map[string]int{}
	for _, c := range a.containers(pod) {
		if c.State == "running" {
			out[c.Labels["io.kubernetes.pod.uid"]]++
		}
	}
	return out
}

// waitOnlyUID waits until the pod name's running containers (infra and
// app) are all of uid, and /pods shows that pod under that uid alone.
func (a *agent) waitOnlyUID(pod, uid string) {
	a.t.Helper()
	waitFor(a.t, 30*time.Second, func() (bool, string) {
		got := a.runningUIDs(pod)
		if len(got) != 1 || got[uid] != 2 {
			return false, fmt.Sprintf("pod %s: running containers by uid %v, want 2 of %s alone", pod, got, uid)
		}
		if uids := a.listedUIDs(pod); fmt.Sprint(uids) != fmt.Sprint([]string{uid}) {
			return false, fmt.Sprintf("GET /pods lists pod %s with uids %v, want [%s]", pod, uids, uid)
		}
		return true, ""
	})
}

// listedUIDs returns the uids GET /pods lists under a pod name.
func (a *agent) listedUIDs(pod string) []string {
	a.t.Helper()
	_, body := httpGet(a.api(true) + "/pods")
	var list struct {
		Items []struct {
			Metadata struct {
				Name string `json:"name"`
				UID  string `json:"uid"`
			} `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		a.t.Fatalf("GET /pods: %v: %s", err, body)
	}
	var out []string
	for _, p := range list.Items {
		if p.Metadata.Name == pod {
			out = append(out, p.Metadata.UID)
		}
	}
	sort.Strings(out)
	return out
}

// A manifest's metadata.uid edited in place is another pod: the old UID's
// containers are stopped and it leaves /pods, the new one runs. Edited
// again and again under --max-pods 2, only one ever counts; once the file
// goes, nothing of any of them is left running.
func TestUIDEditedInPlace(t *testing.T) {
	t.Parallel()
	a := startAgent(t, "--max-pods", "2")
	uids := []string{"edit-uid-1", "edit-uid-2", "edit-uid-3", "edit-uid-4"}
	for _, uid := range uids {
		a.writeManifest("edited.json", uidPod("edited", uid))
		a.waitOnlyUID("edited", uid)
	}
	a.removeManifest("edited.json")
	waitFor(t, 30*time.Second, func() (bool, string) {
		got := a.runningUIDs("edited")
		return len(got) == 0 && len(a.listedUIDs("edited")) == 0, fmt.Sprintf("after the file went: running %v, /pods lists %v", got, a.listedUIDs("edited"))
	})
}

// A name POSTed while the file source holds it is rejected; once the file
// goes, the API's pod takes the name and the file pod's containers stop.
func TestNameHandedFromFileToAPI(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	a.writeManifest("handed.json", uidPod("handed", "handed-file-uid"))
	a.waitOnlyUID("handed", "handed-file-uid")
	code, body := request(t, "POST", a.api(false)+"/pods", uidPod("handed", "handed-api-uid"))
	if code != 200 || !strings.Contains(body, "NameConflict") {
		t.Fatalf("POST of a name the file holds = %d %s, want 200 with a NameConflict rejection", code, body)
	}
	a.removeManifest("handed.json")
	a.waitOnlyUID("handed", "handed-api-uid")
	if code, body := request(t, "DELETE", a.api(false)+"/pods/default/handed", ""); code != 200 {
		t.Fatalf("DELETE = %d %s", code, body)
	}
	waitFor(t, 30*time.Second, func() (bool, string) {
		got := a.runningUIDs("handed")
		return len(got) == 0, fmt.Sprintf("after DELETE: running %v", got)
	})
}

// Pod b, rejected because pod a holds its uid, is admitted in the very merge
// that removes a: a's containers stop, b runs and is listed under the uid.
func TestUIDConflictClearsInOneMerge(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	const uid = "shared-uid-clears"
	a.writeManifest("a.json", uidPod("uid-holder", uid))
	a.waitOnlyUID("uid-holder", uid)
	a.writeManifest("b.json", uidPod("uid-taker", uid))
	waitFor(t, 30*time.Second, func() (bool, string) {
		_, sources := httpGet(a.api(true) + "/sources")
		return strings.Contains(sources, "UIDConflict") || strings.Contains(sources, "its uid "+uid), "/sources: " + sources
	})
	a.removeManifest("a.json")
	a.waitOnlyUID("uid-taker", uid)
	waitFor(t, 30*time.Second, func() (bool, string) {
		got := a.runningUIDs("uid-holder")
		return len(got) == 0 && len(a.listedUIDs("uid-holder")) == 0, fmt.Sprintf("uid-holder: running %v, /pods lists %v", got, a.listedUIDs("uid-holder"))
	})
	a.waitRounds(3)
	a.waitOnlyUID("uid-taker", uid)
}
