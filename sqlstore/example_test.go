package sqlstore_test

import (
	"fmt"

	"github.com/acemq-go/acemq/sqlstore"
)

// A query is written once with ? placeholders; the dialect named in a
// setting rewrites it for its database.
func ExampleParseDialect() {
	for _, name := range []string{"postgres", "sqlite", "MySQL", "oracle"} {
		d, err := sqlstore.ParseDialect(name)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("%s: %s\n", d, d.Rebind("DELETE FROM outbox WHERE id IN ("+sqlstore.List(2)+") AND note <> '?'"))
	}
	// Output:
	// postgres: DELETE FROM outbox WHERE id IN ($1, $2) AND note <> '?'
	// sqlite: DELETE FROM outbox WHERE id IN (?, ?) AND note <> '?'
	// mysql: DELETE FROM outbox WHERE id IN (?, ?) AND note <> '?'
	// acemq: unknown SQL dialect "oracle"; use postgres, sqlite or mysql
}
