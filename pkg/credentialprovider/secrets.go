package credentialprovider

import (
	"encoding/json"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// ErrNotRegistrySecret is an image pull secret of a type that holds no
// registry credentials: the kubelet skips it.
var ErrNotRegistrySecret = errors.New("credentialprovider: not a registry credentials secret")

// AddSecret adds the registry credentials of an image pull secret: the
// .dockerconfigjson of a kubernetes.io/dockerconfigjson secret, or the
// .dockercfg of a kubernetes.io/dockercfg one. A secret of another type
// (or without its key) is ErrNotRegistrySecret; one whose data cannot be
// parsed is an error too. Either way nothing of it is added.
func (k *Keyring) AddSecret(s *v1.Secret) error {
	var cfg dockerConfig
	var err error
	switch data := s.Data; {
	case s.Type == v1.SecretTypeDockerConfigJson && len(data[v1.DockerConfigJsonKey]) > 0:
		cfg, err = parseConfigJSON(data[v1.DockerConfigJsonKey])
	case s.Type == v1.SecretTypeDockercfg && len(data[v1.DockerConfigKey]) > 0:
		cfg, err = parseDockercfg(data[v1.DockerConfigKey])
	default:
		return fmt.Errorf("secret %s/%s of type %q: %w", s.Namespace, s.Name, s.Type, ErrNotRegistrySecret)
	}
	if err != nil {
		return fmt.Errorf("secret %s/%s: %w", s.Namespace, s.Name, redacted(err))
	}
	k.add(cfg)
	return nil
}

// redacted is a parse error of a secret's data that quotes none of it: a
// JSON syntax error names the character it stopped at, which may be a
// credential's.
func redacted(err error) error {
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		return fmt.Errorf("malformed JSON at offset %d", syntax.Offset)
	}
	return err
}
