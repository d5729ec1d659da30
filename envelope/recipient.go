package envelope

// Recipient is one destination of a delivery request:
// {"channel":"email","address":"…"}, {"channel":"sms","address":"+…"},
// {"channel":"whatsapp","address":"+…"} or {"channel":"webhook","endpoint":"<name>"}.
type Recipient struct {
	Channel  string `json:"channel" yaml:"channel"`
	Address  string `json:"address,omitempty" yaml:"address"`
	Endpoint string `json:"endpoint,omitempty" yaml:"endpoint"`
	Name     string `json:"name,omitempty" yaml:"name"`
	// Conversation, instead of a channel and address, sends to a
	// conversation's current channel, address and thread (cnv_…).
	Conversation string `json:"conversation,omitempty" yaml:"conversation"`
}

// Target is the address or endpoint, whichever the channel uses.
func (r Recipient) Target() string {
	if s := tableSpec(r.Channel); s != nil {
		return s.Target(r)
	}
	return r.Address
}
