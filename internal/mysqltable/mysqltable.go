// Package mysqltable checks that an existing MySQL table can keep the
// promises an AceMQ store makes on it. CREATE TABLE IF NOT EXISTS leaves a
// table made earlier (by hand, by an older schema, or under another
// server default) as it is; EnsureSchema then asks this package whether it
// will do.
package mysqltable

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// Column is a column whose type matters, with the definition that gives
// it that type (for the ALTER TABLE the error advises) and why it matters.
type Column struct {
	Name       string
	Type       string // information_schema's DATA_TYPE, e.g. "varbinary"
	Definition string // e.g. "VARBINARY(64) NOT NULL"
	Why        string // e.g. "compared byte for byte, so ids differing in case stay two ids"
}

// Check returns nil when table, in the connection's current database, is
// InnoDB, keeps every text column in utf8mb4 and gives each of columns its
// Type. Otherwise it returns an error naming what is wrong and why it
// matters, ending in "; fix it with: " and the one statement that fixes
// it. A table that does not exist is not checked.
func Check(ctx context.Context, db *sql.DB, table string, columns ...Column) error {
	var engine sql.NullString
	err := db.QueryRowContext(ctx, `SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?`, table).Scan(&engine)
	if err == sql.ErrNoRows {
		return nil
	}
	if err != nil {
		return fmt.Errorf("acemq: cannot read how table %s is stored: %w", table, err)
	}
	if !strings.EqualFold(engine.String, "InnoDB") {
		return fmt.Errorf("acemq: table %s uses the %s engine, which has no transactions, so a rolled-back write would stay; fix it with: ALTER TABLE %s ENGINE=InnoDB", table, engine.String, table)
	}
	rows, err := db.QueryContext(ctx, `SELECT COLUMN_NAME, DATA_TYPE, CHARACTER_SET_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION`, table)
	if err != nil {
		return fmt.Errorf("acemq: cannot read the columns of table %s: %w", table, err)
	}
	defer rows.Close()
	types := map[string]string{}
	var latin []string
	for rows.Next() {
		var name, typ string
		var charset sql.NullString
		if err := rows.Scan(&name, &typ, &charset); err != nil {
			return fmt.Errorf("acemq: cannot read the columns of table %s: %w", table, err)
		}
		types[strings.ToLower(name)] = strings.ToLower(typ)
		if charset.Valid && charset.String != "utf8mb4" {
			latin = append(latin, fmt.Sprintf("%s.%s (%s)", table, name, charset.String))
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("acemq: cannot read the columns of table %s: %w", table, err)
	}
	var wrong, fixes []string
	for _, c := range columns {
		if t := types[c.Name]; t != c.Type {
			wrong = append(wrong, fmt.Sprintf("%s.%s is %s, not %s (%s)", table, c.Name, t, c.Type, c.Why))
			fixes = append(fixes, "MODIFY "+c.Name+" "+c.Definition)
		}
	}
	if len(wrong) > 0 {
		return fmt.Errorf("acemq: %s; fix it with: ALTER TABLE %s %s", strings.Join(wrong, "; "), table, strings.Join(fixes, ", "))
	}
	if len(latin) > 0 {
		return fmt.Errorf("acemq: %s cannot hold text in every script; fix it with: ALTER TABLE %s CONVERT TO CHARACTER SET utf8mb4", strings.Join(latin, ", "), table)
	}
	return nil
}
