package credentialprovider

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
)

// dockerConfig is the registry entries of a Docker config, by the key
// Docker wrote them under.
type dockerConfig map[string]configEntry

// configEntry is one registry's credential: auth, base64 of
// "user:password", wins over username and password.
type configEntry struct {
	Auth     string `json:"auth"`
	Username string `json:"username"`
	Password string `json:"password"`
}

// errNoAuths is a Docker config without config.json's "auths".
var errNoAuths = errors.New(`no "auths"`)

// parseConfigJSON reads config.json's format ({"auths": {registry:
// entry}}), that of a kubernetes.io/dockerconfigjson secret.
func parseConfigJSON(data []byte) (dockerConfig, error) {
	var cfg struct {
		Auths map[string]json.RawMessage `json:"auths"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, err
	}
	if cfg.Auths == nil {
		return nil, errNoAuths
	}
	return parseEntries(cfg.Auths)
}

// parseDockercfg reads the legacy .dockercfg format ({registry: entry}),
// that of a kubernetes.io/dockercfg secret.
func parseDockercfg(data []byte) (dockerConfig, error) {
	var entries map[string]json.RawMessage
	if err := json.Unmarshal(data, &entries); err != nil {
		return nil, err
	}
	return parseEntries(entries)
}

// parseEntries decodes the entries of either format. A value that is no
// entry (a legacy file's other settings) is skipped, and so is an entry
// without a credential (config.json's for a credential helper); an auth
// that is not base64 is an error.
func parseEntries(raw map[string]json.RawMessage) (dockerConfig, error) {
	cfg := dockerConfig{}
	for loc, r := range raw {
		var e configEntry
		if err := json.Unmarshal(r, &e); err != nil {
			continue
		}
		if e.Auth != "" {
			dec, err := base64.StdEncoding.DecodeString(e.Auth)
			if err != nil {
				return nil, fmt.Errorf("auth of %s: %w", loc, err)
			}
			e.Username, e.Password, _ = strings.Cut(string(dec), ":")
		}
		if e.Username == "" && e.Password == "" {
			continue
		}
		cfg[loc] = e
	}
	return cfg, nil
}

// LoadKeyring reads the node's Docker config files: config.json, or the
// legacy .dockercfg. Missing files are skipped.
func LoadKeyring(paths ...string) (*Keyring, error) {
	k := &Keyring{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		cfg, err := parseConfigJSON(data)
		if errors.Is(err, errNoAuths) {
			cfg, err = parseDockercfg(data) // a legacy file, whatever its name
		}
		if err != nil {
			return nil, fmt.Errorf("docker config %s: %w", p, err)
		}
		k.add(cfg)
	}
	return k, nil
}
