// Package config is beachd's configuration: the schema of the YAML file
// (docs/configuration.md), its defaults, ${ENV} expansion, and every check
// `beachd config check` makes. It reads a file and judges it; it starts
// nothing. cmd/beachd builds the daemon's parts from the Config it returns.
//
// Reading a file:
//   - Load (Parse for a file's content) expands every ${NAME} in a value
//     with the getenv it is given (an empty value counts as unset), decodes
//     the result with unknown keys refused, and fills the defaults that
//     other values derive from (FillDefaults). It does not judge values.
//   - Check (CheckBytes) does the same and then checks everything in the
//     same pass: each value, the references between sections (a schedule's
//     agent, an approver's webhook endpoint, an endpoint's part types), the
//     template directory, and what a running daemon needs. With dev false
//     it accepts what `beachd serve` and `beachd config check` accept; with
//     dev true, what `beachd dev` and `beachd render` accept (a twilio
//     section without credentials, inbound addresses whose channel is
//     missing: dev's own mail server and recorder stand in).
//   - Validate checks a Config built or changed in code; ValidateServe adds
//     what Check adds for a running daemon.
//
// What a Config guarantees after Check without error, or after Load and
// Validate (ValidateServe) without error: every key in the file is known
// and decoded to its type; every value is within its documented bounds;
// every reference resolves; the returned *envelope.Registry holds the
// canonical part types and the file's part_types. The accessors
// (ApproverSets, InboundAgents, RendererConfig, ...) assume such a Config
// and give its sections normalised, with their defaults.
//
// Errors. Every problem names its key path as written in the file
// ("email.smtp.port", "schedules[0].cron",
// "agents.travel.inbound.email[1]"). A file's problems are all reported at
// once in one *Error, each with the line and column of its key (or of the
// nearest section present, for a required key that is missing), in the
// order of the file; a value refused as written (an unset variable, a
// wrong type) is not judged again. Only a file that is not YAML at all, or
// larger than 1 MiB, is a single error without keys. A value quoted in a
// type problem is cut at 60 characters, and a connection string's password
// is never shown.
//
// Adding a key:
//  1. A field with a yaml tag in its section's struct, in the section's
//     file (email.go for email:, store.go for store:, ...). Decoding,
//     ${ENV} expansion, unknown-key and wrong-type problems with their
//     positions need no code: they follow from the struct (paths.go).
//  2. Its default. The zero value means "the default": say which in the
//     field's comment and in its check's message ("0: the default, 32").
//     Apply it where the value is used (the package the option feeds, or
//     its wire_ file in cmd/beachd), or in FillDefaults when other values
//     derive from it.
//  3. Its check, in the section's validate method:
//     v.errorf("section.key", "must be between 1 and 10, got %d", n), with
//     the key path as written in the file; its position is found from the
//     path. A check that needs another section goes in Config.check, one
//     that only a running daemon needs in Config.checkServe.
//  4. The key in docs/configuration.md, and in beachd.example.yaml when
//     most installations set it; a test in the section's _test.go.
//
// A new section is a struct type with a validate(v *validator) method, a
// field of Config with its yaml tag, and a call in Config.check.
package config
