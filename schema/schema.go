// Package schema holds MailFathom's SQL migrations and applies them, together
// with River's own tables, to a PostgreSQL database.
//
// The application's migrations are golang-migrate SQL files embedded from
// migrations/; River's come from rivermigrate. Both are applied under one
// PostgreSQL advisory lock, so replicas starting at the same moment migrate
// once and the others wait. Nothing here migrates down: a rollback is an
// operator's decision, made with the migrate tool against a backup.
package schema

import (
	"embed"
	"fmt"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// MigrationsTable is the table golang-migrate records the application's
// schema version in.
const MigrationsTable = "schema_migrations"

// advisoryLockKey serializes migration across replicas. The value is
// arbitrary but fixed: every MailFathom process must use the same one.
const advisoryLockKey int64 = 0x6d61696c66617468 // "mailfath"

// Versions reports where a database stands against the migrations this
// binary carries.
type Versions struct {
	// Schema is the application's golang-migrate version; 0 means none
	// applied.
	Schema uint
	// SchemaLatest is the newest application migration this binary carries.
	SchemaLatest uint
	// SchemaDirty reports a migration that failed halfway and needs an
	// operator (golang-migrate refuses to continue from a dirty version).
	SchemaDirty bool
	// River is the newest River migration applied; 0 means none.
	River int
	// RiverLatest is the newest River migration this binary's River carries.
	RiverLatest int
}

// Current reports whether both schemas are at the versions this binary
// expects and neither is dirty.
func (v Versions) Current() bool {
	return !v.SchemaDirty && v.Schema == v.SchemaLatest && v.River == v.RiverLatest
}

// String renders the versions for a log line or the migrate command.
func (v Versions) String() string {
	dirty := ""
	if v.SchemaDirty {
		dirty = " (dirty)"
	}
	return fmt.Sprintf("schema %d/%d%s, river %d/%d", v.Schema, v.SchemaLatest, dirty, v.River, v.RiverLatest)
}
