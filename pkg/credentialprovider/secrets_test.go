package credentialprovider

import (
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Image pull secrets of both registry types are read; other types hold
// nothing; malformed data is an error that quotes none of it.
func TestAddSecret(t *testing.T) {
	secret := func(typ v1.SecretType, key, data string) *v1.Secret {
		return &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "regcred"}, Type: typ,
			Data: map[string][]byte{key: []byte(data)}}
	}
	for _, c := range []struct {
		name    string
		secret  *v1.Secret
		image   string
		want    string // usernames
		err     string // in the error; "" for none
		notRegs bool   // ErrNotRegistrySecret
	}{
		{name: "dockerconfigjson", image: "reg.example:5000/app:1", want: "alice",
			secret: secret(v1.SecretTypeDockerConfigJson, v1.DockerConfigJsonKey, `{"auths": {"reg.example:5000": {"auth": "`+b64("alice:pw")+`"}}}`)},
		{name: "dockerconfigjson username and password", image: "reg.example/app", want: "bob",
			secret: secret(v1.SecretTypeDockerConfigJson, v1.DockerConfigJsonKey, `{"auths": {"https://reg.example/v1/": {"username": "bob", "password": "pw"}}}`)},
		{name: "dockerconfigjson for Docker Hub", image: "user/app", want: "hub",
			secret: secret(v1.SecretTypeDockerConfigJson, v1.DockerConfigJsonKey, `{"auths": {"https://index.docker.io/v1/": {"auth": "`+b64("hub:pw")+`"}}}`)},
		{name: "dockerconfigjson other registry", image: "other.example/app", want: "",
			secret: secret(v1.SecretTypeDockerConfigJson, v1.DockerConfigJsonKey, `{"auths": {"reg.example": {"auth": "`+b64("alice:pw")+`"}}}`)},
		{name: "dockercfg", image: "reg.example/app", want: "carol",
			secret: secret(v1.SecretTypeDockercfg, v1.DockerConfigKey, `{"reg.example": {"auth": "`+b64("carol:pw")+`", "email": "c@example.com"}}`)},
		{name: "dockerconfigjson in legacy format", err: `no "auths"`,
			secret: secret(v1.SecretTypeDockerConfigJson, v1.DockerConfigJsonKey, `{"reg.example": {"auth": "`+b64("carol:pw")+`"}}`)},
		{name: "not JSON", err: "secret ns/regcred: malformed JSON at offset 11",
			secret: secret(v1.SecretTypeDockerConfigJson, v1.DockerConfigJsonKey, `{"auths": s3cret`)},
		{name: "auth not base64", err: "auth of reg.example",
			secret: secret(v1.SecretTypeDockercfg, v1.DockerConfigKey, `{"reg.example": {"auth": "s3cret!"}}`)},
		{name: "opaque", notRegs: true,
			secret: secret(v1.SecretTypeOpaque, v1.DockerConfigJsonKey, `{"auths": {}}`)},
		{name: "type without its key", notRegs: true,
			secret: secret(v1.SecretTypeDockerConfigJson, v1.DockerConfigKey, `{"auths": {}}`)},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := &Keyring{}
			err := k.AddSecret(c.secret)
			switch {
			case c.notRegs:
				if !errors.Is(err, ErrNotRegistrySecret) {
					t.Errorf("error %v, want ErrNotRegistrySecret", err)
				}
			case c.err != "":
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Errorf("error %v, want one with %q", err, c.err)
				}
				if err != nil && (strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "'s'")) {
					t.Errorf("the error quotes the secret's data: %v", err)
				}
			case err != nil:
				t.Errorf("error %v", err)
			}
			if err != nil && k.Len() != 0 {
				t.Errorf("a secret in error added %d credentials", k.Len())
			}
			if got := users(k, c.image); c.image != "" && got != c.want {
				t.Errorf("%s: credentials %q, want %q", c.image, got, c.want)
			}
		})
	}
}
