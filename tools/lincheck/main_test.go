package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/anishathalye/porcupine"
)

func verdict(t *testing.T, lines string) bool {
	t.Helper()
	path := filepath.Join(t.TempDir(), "h.jsonl")
	if err := os.WriteFile(path, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	byBranch, _, err := load([]string{path})
	if err != nil {
		t.Fatal(err)
	}
	return porcupine.CheckOperations(model.ToModel(), byBranch["a"])
}

const made = `{"branch":"a","client":0,"call":1,"ret":2,"op":"create","to":3,"outcome":"ok"}
`

func TestTwoCommitsOntoOneHeadAreALostUpdate(t *testing.T) {
	h := made + `{"branch":"a","client":0,"call":3,"ret":5,"op":"cas","from":3,"to":4,"outcome":"ok"}
{"branch":"a","client":1,"call":6,"ret":7,"op":"cas","from":3,"to":4,"outcome":"ok"}
`
	if verdict(t, h) {
		t.Fatal("a second commit onto a head that had moved was accepted")
	}
}

func TestAReadOfAnOlderHeadAfterANewerOneIsRefused(t *testing.T) {
	h := made + `{"branch":"a","client":0,"call":3,"ret":5,"op":"cas","from":3,"to":4,"outcome":"ok"}
{"branch":"a","client":1,"call":6,"ret":7,"op":"read","value":3,"outcome":"ok"}
`
	if verdict(t, h) {
		t.Fatal("a stale read after an acknowledged commit was accepted")
	}
}

func TestARefusedCommitThatLandedAnywayIsCaught(t *testing.T) {
	h := made + `{"branch":"a","client":0,"call":3,"ret":5,"op":"cas","from":3,"to":4,"outcome":"fail"}
{"branch":"a","client":1,"call":6,"ret":7,"op":"read","value":4,"outcome":"ok"}
`
	if verdict(t, h) {
		t.Fatal("a commit reported refused showed up in the head")
	}
}

func TestAnUnansweredCommitMayLandLaterOrNever(t *testing.T) {
	landed := made + `{"branch":"a","client":0,"call":3,"op":"cas","from":3,"to":4,"outcome":"unknown"}
{"branch":"a","client":1,"call":9,"ret":10,"op":"read","value":4,"outcome":"ok"}
`
	never := made + `{"branch":"a","client":0,"call":3,"op":"cas","from":3,"to":4,"outcome":"unknown"}
{"branch":"a","client":1,"call":9,"ret":10,"op":"read","value":3,"outcome":"ok"}
`
	anyBase := made + `{"branch":"a","client":0,"call":3,"op":"cas","outcome":"unknown"}
{"branch":"a","client":1,"call":9,"ret":10,"op":"read","value":4,"outcome":"ok"}
`
	for name, h := range map[string]string{"landed": landed, "never": never, "any base": anyBase} {
		if !verdict(t, h) {
			t.Fatalf("%s: an unanswered commit was held against the history", name)
		}
	}
}

func TestADestroyedBranchReadsAbsentAndCannotBeCommittedTo(t *testing.T) {
	ok := made + `{"branch":"a","client":0,"call":3,"ret":4,"op":"destroy","outcome":"ok"}
{"branch":"a","client":1,"call":5,"ret":6,"op":"read","value":-1,"outcome":"ok"}
`
	bad := made + `{"branch":"a","client":0,"call":3,"ret":4,"op":"destroy","outcome":"ok"}
{"branch":"a","client":1,"call":5,"ret":6,"op":"cas","from":3,"to":4,"outcome":"ok"}
`
	if !verdict(t, ok) {
		t.Fatal("a read of a destroyed branch as absent was refused")
	}
	if verdict(t, bad) {
		t.Fatal("a commit onto a destroyed branch was accepted")
	}
}

// The case the torture runs met: a destroy killed after its claim, a listing that no
// longer shows the branch, then a retried destroy that finishes the job.
func TestADestroyInterruptedAfterItsClaimReadsAbsentAndIsFinishedByARetry(t *testing.T) {
	interrupted := made + `{"branch":"a","client":0,"call":3,"op":"destroy","outcome":"unknown"}
{"branch":"a","client":1,"call":5,"ret":6,"op":"read","value":-1,"outcome":"ok"}
{"branch":"a","client":0,"call":7,"ret":8,"op":"destroy","outcome":"ok"}
`
	if !verdict(t, interrupted) {
		t.Fatal("a retried destroy that finished an interrupted one was refused")
	}
	// Without the unknown destroy, the same answers are a violation: an ok destroy of a
	// branch that reads absent.
	noClaim := made + `{"branch":"a","client":1,"call":5,"ret":6,"op":"read","value":-1,"outcome":"ok"}
{"branch":"a","client":0,"call":7,"ret":8,"op":"destroy","outcome":"ok"}
`
	if verdict(t, noClaim) {
		t.Fatal("a destroy of a branch nobody had claimed, after it read absent, was accepted")
	}
	// A claimed branch takes no commit, and reads absent until a fork makes it again.
	commitAfterClaim := made + `{"branch":"a","client":0,"call":3,"op":"destroy","outcome":"unknown"}
{"branch":"a","client":1,"call":5,"ret":6,"op":"read","value":-1,"outcome":"ok"}
{"branch":"a","client":1,"call":7,"ret":8,"op":"cas","from":3,"to":4,"outcome":"ok"}
`
	if verdict(t, commitAfterClaim) {
		t.Fatal("a commit onto a branch that had read absent was accepted")
	}
	remade := made + `{"branch":"a","client":0,"call":3,"op":"destroy","outcome":"unknown"}
{"branch":"a","client":1,"call":5,"ret":6,"op":"read","value":-1,"outcome":"ok"}
{"branch":"a","client":1,"call":7,"ret":8,"op":"create","to":9,"outcome":"ok"}
{"branch":"a","client":1,"call":9,"ret":10,"op":"read","value":9,"outcome":"ok"}
`
	if !verdict(t, remade) {
		t.Fatal("a fork that remade a branch after gc finished its claim was refused")
	}
}
