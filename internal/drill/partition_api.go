package drill

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
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
	base, err := url.Parse(strings.TrimSuffix(c.Management[i], "/"))
	if err != nil {
		return fmt.Errorf("node %d's management URL does not parse: %v", i+1, err)
	}
	user := base.User
	base.User = nil
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base.String()+path, nil)
	if err != nil {
		return err
	}
	if user != nil {
		pw, _ := user.Password()
		req.SetBasicAuth(user.Username(), pw)
	}
	resp, err := apiClient.Do(req)
	if err != nil {
		return fmt.Errorf("node %d: GET %s: %v", i+1, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return fmt.Errorf("node %d: GET %s: %v", i+1, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("node %d: GET %s: %s: %s", i+1, path, resp.Status, firstLine(fmt.Errorf("%s", body)))
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("node %d: GET %s: %v", i+1, path, err)
	}
	return nil
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

// apiConnectedNode finds the node client's connections are attached to,
// by the client-provided connection name.
func (c Cluster) apiConnectedNode(ctx context.Context, client string) (int, error) {
	var err error
	for via := range c.Management {
		var rows []struct {
			Node  string         `json:"node"`
			Props map[string]any `json:"client_properties"`
		}
		if e := c.api(ctx, via, "/api/connections?columns=node,client_properties", &rows); e != nil {
			err = e
			continue
		}
		for _, row := range rows {
			if name, _ := row.Props["connection_name"].(string); strings.Contains(name, client) {
				if n := c.indexOf(row.Node); n >= 0 {
					return n, nil
				}
			}
		}
		err = fmt.Errorf("node %d lists no connection of %s", via+1, client)
	}
	return -1, err
}

// apiWhole reports whether every node answers, sees all three nodes
// running and reports no partition; partitioned is the index of a node
// that reports one, else -1.
func (c Cluster) apiWhole(ctx context.Context) (ok bool, partitioned int, why string) {
	for i := range c.Management {
		var nodes []struct {
			Name       string   `json:"name"`
			Running    bool     `json:"running"`
			Partitions []string `json:"partitions"`
		}
		if err := c.api(ctx, i, "/api/nodes?columns=name,running,partitions", &nodes); err != nil {
			return false, -1, err.Error()
		}
		running := 0
		for _, n := range nodes {
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
			return false, -1, fmt.Sprintf("node %d sees %d running nodes", i+1, running)
		}
	}
	return true, -1, ""
}
