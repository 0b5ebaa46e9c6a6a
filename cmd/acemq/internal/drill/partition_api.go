package drill

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// The partition drill asks the cluster about itself (who leads the quorum
// queue, which node a client is attached to, whether every node sees the
// other two) through each node's management HTTP API when Cluster.Management
// is set: an answer in milliseconds, where a rabbitmqctl call boots an
// Erlang VM (a second or two on 3.10, several on 4.0, more on a loaded
// machine). Each question goes to one node and is bounded by apiTimeout: a
// node cut off from the clients does not answer, and the drill asks the
// next.

// apiTimeout bounds one management API request.
const apiTimeout = 5 * time.Second

// apiClient keeps no idle connections: a node cut off mid-run would leave
// one hanging, and a request every second or so needs no pool.
var apiClient = &http.Client{Timeout: apiTimeout, Transport: &http.Transport{DisableKeepAlives: true}}

// api GETs path from node i's management API into out.
func (c Cluster) api(ctx context.Context, i int, path string, out any) error {
	return c.apiDo(ctx, i, http.MethodGet, path, nil, out)
}

// apiDo sends method path (with body as JSON when not nil) to node i's
// management API and reads the answer into out (when not nil).
func (c Cluster) apiDo(ctx context.Context, i int, method, path string, body, out any) error {
	base, err := url.Parse(strings.TrimSuffix(c.Management[i], "/"))
	if err != nil {
		return fmt.Errorf("node %d's management URL does not parse: %v", i+1, err)
	}
	user := base.User
	base.User = nil
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base.String()+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if user != nil {
		pw, _ := user.Password()
		req.SetBasicAuth(user.Username(), pw)
	}
	resp, err := apiClient.Do(req)
	if err != nil {
		return fmt.Errorf("node %d: %s %s: %v", i+1, method, path, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return fmt.Errorf("node %d: %s %s: %v", i+1, method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("node %d: %s %s: %s: %s", i+1, method, path, resp.Status, firstLine(fmt.Errorf("%s", answer)))
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(answer, out); err != nil {
		return fmt.Errorf("node %d: %s %s: %v", i+1, method, path, err)
	}
	return nil
}

// addUser makes user (password pass) with every permission on vhost "/",
// through node 1.
func (c Cluster) addUser(ctx context.Context, user, pass string) error {
	if err := c.apiDo(ctx, 0, http.MethodPut, "/api/users/"+url.PathEscape(user), map[string]string{"password": pass, "tags": ""}, nil); err != nil {
		return err
	}
	return c.apiDo(ctx, 0, http.MethodPut, "/api/permissions/%2F/"+url.PathEscape(user), map[string]string{"configure": ".*", "write": ".*", "read": ".*"}, nil)
}

// deleteUser removes user, through node 1.
func (c Cluster) deleteUser(ctx context.Context, user string) error {
	return c.apiDo(ctx, 0, http.MethodDelete, "/api/users/"+url.PathEscape(user), nil, nil)
}

// nodeNames asks each node its Erlang node name (the names the API's
// answers use), node 1 first.
func (c Cluster) nodeNames(ctx context.Context) ([]string, error) {
	names := make([]string, len(c.Management))
	for i := range c.Management {
		var ov struct {
			Node string `json:"node"`
		}
		if err := c.api(ctx, i, "/api/overview", &ov); err != nil {
			return nil, err
		}
		if ov.Node == "" {
			return nil, fmt.Errorf("node %d: /api/overview names no node", i+1)
		}
		names[i] = ov.Node
	}
	return names, nil
}

// indexOf maps an Erlang node name to its index, -1 when unknown.
func (c Cluster) indexOf(node string) int {
	for i, n := range c.names {
		if n == node {
			return i
		}
	}
	return -1
}

// apiQueue finds quorum queue q's leader and how many members are online,
// asking each node in turn until one answers.
func (c Cluster) apiQueue(ctx context.Context, q string) (leader, online int, err error) {
	for via := range c.Management {
		var row struct {
			Leader string   `json:"leader"`
			Online []string `json:"online"`
		}
		if e := c.api(ctx, via, "/api/queues/%2F/"+url.PathEscape(q), &row); e != nil {
			err = e
			continue
		}
		if row.Leader == "" {
			err = fmt.Errorf("node %d lists no leader for queue %s", via+1, q)
			continue
		}
		return c.indexOf(row.Leader), len(row.Online), nil
	}
	return -1, 0, err
}

// apiConnectedNode finds the node user's connections are attached to, in
// each node's connection tracking, listed per user (the list the broker
// keeps for itself, also with the deprecated management_metrics_collection
// denied, when the statistics list nothing; /api/connections with
// disable_stats reads it on 4.0 but lists nothing on 4.3). The drill gives
// each client a user of its own, so the user names the client.
func (c Cluster) apiConnectedNode(ctx context.Context, user string) (int, error) {
	var err error
	for via := range c.Management {
		var rows []struct {
			Node string `json:"node"`
			User string `json:"user"`
		}
		if e := c.api(ctx, via, "/api/connections/username/"+url.PathEscape(user), &rows); e != nil {
			err = e
			continue
		}
		for _, row := range rows {
			if row.User == user {
				if n := c.indexOf(row.Node); n >= 0 {
					return n, nil
				}
			}
		}
		err = fmt.Errorf("no node lists a connection of user %s", user)
	}
	return -1, err
}

// nodeView is one node as /api/nodes lists it.
type nodeView struct {
	Name       string   `json:"name"`
	Running    bool     `json:"running"`
	Partitions []string `json:"partitions"`
}

// apiWhole reports whether every node answers, sees all three nodes
// running and reports no partition. When it is not whole, partitioned is
// the index of a node to restart, else -1: one that reports a partition
// (RabbitMQ 3.10 lists partitions per node), or one that answers but that
// the other answering nodes see as not running (RabbitMQ 4 with
// management_metrics_collection denied lists no partitions: a node left on
// its own side by the default handling shows as down to the others while
// it runs), or the one that does not answer while the others do
// (silentDown).
func (c Cluster) apiWhole(ctx context.Context) (ok bool, partitioned int, why string) {
	views := make([][]nodeView, len(c.Management))
	answered := make([]bool, len(c.Management))
	var reasons []string
	for i := range c.Management {
		if err := c.api(ctx, i, "/api/nodes", &views[i]); err != nil {
			reasons = append(reasons, err.Error())
			continue
		}
		answered[i] = true
		running := 0
		for _, n := range views[i] {
			if len(n.Partitions) > 0 {
				p := c.indexOf(n.Name)
				if p < 0 {
					p = i
				}
				return false, p, fmt.Sprintf("node %s reports partitions %v (asked node %d)", n.Name, n.Partitions, i+1)
			}
			if n.Running {
				running++
			}
		}
		if running != len(c.Management) {
			reasons = append(reasons, fmt.Sprintf("node %d sees %d running nodes", i+1, running))
		}
	}
	if len(reasons) == 0 {
		return true, -1, ""
	}
	// The node the most answering others see as down while it answers and
	// sees itself running.
	partitioned, most := -1, 0
	for n := range c.Management {
		if !answered[n] || !slices.ContainsFunc(views[n], func(v nodeView) bool { return v.Name == c.names[n] && v.Running }) {
			continue // silent, or down by its own account
		}
		down := 0
		for i := range c.Management {
			if i == n || !answered[i] {
				continue
			}
			for _, v := range views[i] {
				if v.Name == c.names[n] && !v.Running {
					down++
				}
			}
		}
		if down > most {
			partitioned, most = n, down
		}
	}
	if most < 2 {
		partitioned = -1 // no majority says so
	}
	if partitioned < 0 {
		partitioned = silentDown(answered)
	}
	return false, partitioned, strings.Join(reasons, "; ")
}

// silentDown returns the one node that does not answer while the others
// do, else -1: on 3.10 a node that pause_minority paused can hang in its
// own restart after the heal (Erlang's global name server stuck; its log:
// "Global hang workaround"), its listeners closed while the others may
// still list it as running, and restarting its app is the operator's
// step. settle asks only after 15 s, so a node merely slow to answer is
// left alone.
func silentDown(answered []bool) int {
	found := -1
	for n := range answered {
		if answered[n] {
			continue
		}
		if found >= 0 {
			return -1 // more than one silent: not this node's trouble alone
		}
		found = n
	}
	return found
}
