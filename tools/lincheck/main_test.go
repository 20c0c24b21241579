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
