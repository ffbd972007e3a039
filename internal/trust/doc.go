// Package trust tells whether the definitions a server lists can be trusted with the model:
// whether their text hides characters from the person who reviews them (Findings), and
// whether they are the definitions the user approved with pin (Lock).
//
// Every tool description a server lists goes into the model's context, and a server can
// change it at any time. Both checks read the same thing, what a definition tells the model:
// a Server is read once from a server's lists, and each definition in it is decoded at most
// once, the first time the scan or the lock needs it; most definitions are plain ASCII and
// the scan passes them without decoding them.
//
// The scan is deterministic and always on: each Class of hidden character is a fixed set of
// code points, allowed only in the few places where it has a visible purpose (a joiner
// inside an emoji, a variation selector after an emoji or an ideograph). The rules are the
// documentation of the classes; TestScanText shows each, and TestNoFindingOnRealServers
// runs them over the recorded definitions of real servers.
//
// The lock pins, per server key, a digest of each member of each tool, prompt and resource
// template, and of the instructions, so that a difference can be named member by member
// (Compare). The digests are SHA-256 of the RFC 8785 canonical JSON of each member (so key
// order, whitespace and escapes do not count). The file holds no secret (see Lock).
//
// What the integration calls: Read at each new list of a server (where the aggregator clears
// its schema verdicts), Warning once per server at start-up (and with the new findings after
// its lists change), Server.Findings in check, Lock.Compare where a catalog is built with
// --pinned and in check, Lock.Set and WriteLock in pin. docs/trust-integration.md has the
// details.
package trust
