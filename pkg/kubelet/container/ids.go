package container

import "strings"

// ShortID is the 12-character form of a container ID, for logs.
func ShortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// SplitImage splits "repo:tag": a reference without a tag is "latest" (a
// registry port is not a tag); a digest reference keeps its "@" part in the
// repository and has no tag.
func SplitImage(image string) (repo, tag string) {
	if strings.Contains(image, "@") {
		return image, ""
	}
	i := strings.LastIndex(image, ":")
	if i < 0 || strings.Contains(image[i:], "/") {
		return image, "latest"
	}
	return image[:i], image[i+1:]
}
