package server

import (
	"errors"
	"net/http/httptest"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestParseStreamOptions(t *testing.T) {
	cases := []struct {
		query   string
		want    streamOptions
		wantErr bool
	}{
		{"input=1&output=1&error=1", streamOptions{stdin: true, stdout: true, stderr: true}, false},
		{"output=true", streamOptions{stdout: true}, false},                                            // client-go's parameter codec writes "true"
		{"input=1&output=1&error=1&tty=1", streamOptions{stdin: true, stdout: true, tty: true}, false}, // a terminal has one output
		{"tty=1", streamOptions{}, true},
		{"", streamOptions{}, true},
	}
	for _, c := range cases {
		got, err := parseStreamOptions(httptest.NewRequest("GET", "/exec/ns/p/c?"+c.query, nil))
		if (err != nil) != c.wantErr || (!c.wantErr && got != c.want) {
			t.Errorf("%q: %+v, %v; want %+v (error %v)", c.query, got, err, c.want, c.wantErr)
		}
	}
}

// The outcome of a command as client-go reads it from the error stream.
func TestExitStatus(t *testing.T) {
	if st := exitStatus(0, nil); st.Status != metav1.StatusSuccess {
		t.Errorf("exit 0: %+v", st)
	}
	st := exitStatus(3, nil)
	if st.Status != metav1.StatusFailure || st.Reason != "NonZeroExitCode" || st.Details == nil ||
		len(st.Details.Causes) != 1 || st.Details.Causes[0].Type != "ExitCode" || st.Details.Causes[0].Message != "3" {
		t.Errorf("exit 3: %+v", st)
	}
	if st := exitStatus(0, errors.New("no such container")); st.Reason != metav1.StatusReasonInternalError || st.Message != "no such container" {
		t.Errorf("runtime error: %+v", st)
	}
}
