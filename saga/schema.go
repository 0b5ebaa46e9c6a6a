package saga

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/acemq-go/acemq/saga/internal/mysqltable"
	"github.com/acemq-go/acemq/sqlstore"
)

// Schema returns the statements EnsureSchema runs for dialect: the two
// tables of behaviour spec §7.8 and an index on (status, locked_until) for
// the sweep. On MySQL identifiers are VARBINARY (compared byte for byte),
// text is utf8mb4 and the engine InnoDB whatever the server's defaults.
func Schema(d sqlstore.Dialect) []string {
	id, name, text := "VARCHAR(64)", "VARCHAR(255)", "TEXT"
	tail := ""
	if d == sqlstore.MySQL {
		id, name = "VARBINARY(64)", "VARBINARY(1020)"
		tail = " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
	}
	saga := `CREATE TABLE IF NOT EXISTS acemq_saga (
  instance_id ` + id + ` NOT NULL PRIMARY KEY,
  saga_name ` + name + ` NOT NULL,
  subject ` + d.BlobType() + `,
  subject_content_type VARCHAR(255),
  status VARCHAR(16) NOT NULL,
  failed_step ` + name + `,
  failure ` + text + `,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  locked_by ` + id + `,
  locked_until BIGINT NOT NULL,
  version INTEGER NOT NULL`
	step := `CREATE TABLE IF NOT EXISTS acemq_saga_step (
  instance_id ` + id + ` NOT NULL,
  step_index INTEGER NOT NULL,
  step_name ` + name + ` NOT NULL,
  status VARCHAR(24) NOT NULL,
  attempts INTEGER NOT NULL,
  last_error ` + text + `,
  started_at BIGINT,
  finished_at BIGINT,
  PRIMARY KEY (instance_id, step_index)`
	if d == sqlstore.MySQL {
		return []string{saga + `,
  INDEX acemq_saga_due (status, locked_until)
)` + tail, step + `
)` + tail}
	}
	return []string{saga + `
)`, step + `
)`, `CREATE INDEX IF NOT EXISTS acemq_saga_due ON acemq_saga (status, locked_until)`}
}

var mysqlSagaColumns = []mysqltable.Column{
	{Name: "instance_id", Type: "varbinary", Definition: "VARBINARY(64) NOT NULL", Why: "instance ids are compared byte for byte"},
	{Name: "locked_by", Type: "varbinary", Definition: "VARBINARY(64)", Why: "lease owners are compared byte for byte (fencing)"},
}

var mysqlStepColumns = []mysqltable.Column{
	{Name: "instance_id", Type: "varbinary", Definition: "VARBINARY(64) NOT NULL", Why: "instance ids are compared byte for byte"},
}

// EnsureSchema creates the saga tables and index if missing. Idempotent.
// On MySQL it also checks tables that were there already (InnoDB,
// utf8mb4, byte-compared identifiers) and fails with the ALTER TABLE that
// fixes them.
func EnsureSchema(ctx context.Context, db *sql.DB, d sqlstore.Dialect) error {
	if err := d.Validate(); err != nil {
		return err
	}
	for _, stmt := range Schema(d) {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("acemq: cannot create the saga tables: %w", err)
		}
	}
	if d == sqlstore.MySQL {
		if err := mysqltable.Check(ctx, db, "acemq_saga", mysqlSagaColumns...); err != nil {
			return err
		}
		return mysqltable.Check(ctx, db, "acemq_saga_step", mysqlStepColumns...)
	}
	return nil
}
