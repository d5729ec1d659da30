package twilio

import (
	"net/url"
	"testing"
)

// TestSignatureRepeatedValues: a form repeating a value under one name is
// accepted with the signature Twilio's libraries compute. The vector is
// twilio-node 5.13.1's getExpectedTwilioSignature("test-auth-token", hookURL,
// {From, Body, MediaUrl0: [x, x], Tag: [b, a, b]}), which signs each name's
// distinct values once, sorted.
func TestSignatureRepeatedValues(t *testing.T) {
	form := url.Values{
		"From": {"+15550001111"}, "Body": {"yes"},
		"MediaUrl0": {"https://a.example/x", "https://a.example/x"},
		"Tag":       {"b", "a", "b"},
	}
	const node = "2BQP6ArG0j0HF5zv3tNXKoLDzaI="
	if got := Signature("test-auth-token", hookURL, form); got != node {
		t.Errorf("Signature = %q, want twilio-node's %q", got, node)
	}
	if !ValidSignature("test-auth-token", hookURL, form, node) {
		t.Error("twilio-node's signature of a form with a repeated value refused")
	}
	// twilio-python keeps the repeats (sorted): accepted too.
	if py := signature("test-auth-token", hookURL, form, false); !ValidSignature("test-auth-token", hookURL, form, py) {
		t.Error("twilio-python's signature of a form with a repeated value refused")
	} else if py == node {
		t.Fatal("the two rules agree on this form: the test proves nothing")
	}
	// Dropping a repeat is not dropping a distinct value.
	other := url.Values{"From": {"+15550001111"}, "Body": {"yes"}, "MediaUrl0": {"https://a.example/x"}, "Tag": {"a"}}
	if ValidSignature("test-auth-token", hookURL, other, node) {
		t.Error("signature accepted for a form without the value b")
	}
}
