package dockertools

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"time"

	docker "github.com/fsouza/go-dockerclient"
	"golang.org/x/sync/singleflight"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// PullAuth pulls an image with one credential (nil: anonymously).
func (c *Client) PullAuth(ctx context.Context, image string, auth *kubecontainer.Auth, inactivity time.Duration) error {
	repo, tag := kubecontainer.SplitImage(image)
	var a docker.AuthConfiguration
	if auth != nil {
		a = docker.AuthConfiguration{Username: auth.Username, Password: auth.Password, ServerAddress: auth.ServerAddress}
	}
	err := c.c.PullImage(docker.PullImageOptions{
		Repository: repo, Tag: tag, OutputStream: discard{}, InactivityTimeout: inactivity, Context: ctx,
	}, a)
	if err != nil {
		return fmt.Errorf("pull image %s: %w", image, translate(err))
	}
	c.refs.forget() // an image pulled again may have got a repo digest
	return nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// ImageID is the ID of an image reference ("" and kubecontainer.ErrImageNotFound if absent).
func (c *Client) ImageID(ctx context.Context, image string) (string, error) {
	img, err := c.c.InspectImage(image)
	if err != nil {
		return "", translate(err)
	}
	return img.ID, nil
}

// Prefixes of a container status's imageID, as cri-dockerd reports it.
const (
	imageIDPrefix         = "docker://"
	pullableImageIDPrefix = "docker-pullable://"
)

// PullableImageID is an image as the kubelet with cri-dockerd reports it in
// a container status's imageID: docker-pullable://<repo>@sha256:… by the
// first of its repo digests, the reference it can be pulled again by;
// docker://<ID> for an image with none (built or loaded here, never pulled
// or pushed).
func PullableImageID(id string, repoDigests []string) string {
	for _, d := range repoDigests {
		if !strings.HasPrefix(d, "<none>") {
			return pullableImageIDPrefix + d
		}
	}
	return imageIDPrefix + id
}

// imageRef is the imageID of a container whose image has ID id. An image
// is inspected once, then remembered until a pull (which may give it a
// repo digest) or a removal; one that is gone is named by its ID, one
// that could not be inspected is asked again next time.
func (c *Client) imageRef(id string) string {
	if ref, ok := c.refs.get(id); ok {
		return ref
	}
	img, err := c.c.InspectImage(id)
	switch {
	case err == nil:
		ref := PullableImageID(id, img.RepoDigests)
		c.refs.put(id, ref)
		return ref
	case errors.Is(translate(err), kubecontainer.ErrImageNotFound):
		c.refs.put(id, imageIDPrefix+id)
	}
	return imageIDPrefix + id
}

// imageRefs remembers the imageID of each image ID seen (a node holds
// tens of images: never pruned but by forget).
type imageRefs struct {
	mu   sync.Mutex
	byID map[string]string // guarded by mu
}

func (r *imageRefs) get(id string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ref, ok := r.byID[id]
	return ref, ok
}

func (r *imageRefs) put(id, ref string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byID == nil {
		r.byID = map[string]string{}
	}
	r.byID[id] = ref
}

func (r *imageRefs) forget() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.byID = nil
}

// RemoveImage removes an image by ID (not forced: Docker refuses if a
// container uses it).
func (c *Client) RemoveImage(ctx context.Context, id string) error {
	defer c.images.forget()
	defer c.refs.forget()
	if err := c.c.RemoveImageExtended(id, docker.RemoveImageOptions{Context: ctx}); err != nil {
		return fmt.Errorf("remove image %s: %w", kubecontainer.ShortID(strings.TrimPrefix(id, "sha256:")), translate(err))
	}
	return nil
}

// ImagesInUse returns the images of every container on the daemon, whoever
// made it, as each was named at create time (a reference, or an ID).
func (c *Client) ImagesInUse(ctx context.Context) (map[string]bool, error) {
	ctx, cancel := short(ctx)
	defer cancel()
	list, err := c.c.ListContainers(docker.ListContainersOptions{All: true, Context: ctx})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", translate(err))
	}
	used := map[string]bool{}
	for _, l := range list {
		used[l.Image] = true
	}
	return used, nil
}

// ListImages lists the daemon's images: the names each is known by (its
// digests, then its tags) and its size.
func (c *Client) ListImages(ctx context.Context) ([]kubecontainer.Image, error) {
	ctx, cancel := short(ctx)
	defer cancel()
	list, err := c.c.ListImages(docker.ListImagesOptions{Context: ctx})
	if err != nil {
		return nil, fmt.Errorf("list images: %w", translate(err))
	}
	out := make([]kubecontainer.Image, 0, len(list))
	for _, img := range list {
		var names []string
		for _, n := range append(append([]string{}, img.RepoDigests...), img.RepoTags...) {
			// Docker names an untagged image "<none>:<none>" (or
			// "<none>@<none>"): no name a pod could use.
			if !strings.HasPrefix(n, "<none>") {
				names = append(names, n)
			}
		}
		out = append(out, kubecontainer.Image{Names: names, Size: img.Size})
	}
	return out, nil
}

// ImageFsUsage is the use of the file system holding Docker's images, in
// percent.
func (c *Client) ImageFsUsage(ctx context.Context) (int, error) {
	info, err := c.c.Info()
	if err != nil {
		return 0, fmt.Errorf("docker info: %w", translate(err))
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(info.DockerRootDir, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", info.DockerRootDir, err)
	}
	if st.Blocks == 0 {
		return 0, nil
	}
	return int(100 * (st.Blocks - st.Bavail) / st.Blocks), nil
}

// DiskUsage asks Docker what its images and the containers labelled
// label=value hold on disk (docker system df: Docker walks every writable
// layer, so this is for a background measurement, not a request).
func (c *Client) DiskUsage(ctx context.Context, label, value string) (*kubecontainer.DiskUsage, error) {
	du, err := c.c.DiskUsage(docker.DiskUsageOptions{Context: ctx})
	if err != nil {
		return nil, fmt.Errorf("docker system df: %w", translate(err))
	}
	info, err := c.c.Info()
	if err != nil {
		return nil, fmt.Errorf("docker info: %w", translate(err))
	}
	out := &kubecontainer.DiskUsage{Writable: map[string]int64{}, Images: du.LayersSize, RootDir: info.DockerRootDir}
	for _, ct := range du.Containers {
		if ct.Labels[label] == value {
			out.Writable[ct.ID] = ct.SizeRw
		}
	}
	return out, nil
}

// presentFor is how long an image found present is taken to stay so. Every
// container start checks its image, and a burst of pods checks the same one
// hundreds of times in seconds: inspects dockerd spends a millisecond or two
// of CPU on each, on a node whose CPU the burst has used up. An image
// removed meanwhile by someone else fails its create (and is forgotten);
// the retry checks again.
const presentFor = 5 * time.Second

// presentImages remembers the images recently found present, and collapses
// concurrent checks of one image into one inspect.
type presentImages struct {
	group singleflight.Group
	mu    sync.Mutex
	seen  map[string]time.Time // image reference -> when found present
}

func (p *presentImages) recent(image string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	at, ok := p.seen[image]
	return ok && time.Since(at) < presentFor
}

func (p *presentImages) found(image string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.seen == nil {
		p.seen = map[string]time.Time{}
	}
	for ref, at := range p.seen { // a node has few images: prune as we go
		if time.Since(at) >= presentFor {
			delete(p.seen, ref)
		}
	}
	p.seen[image] = time.Now()
}

// forget drops every memory: an image was removed, by reference or ID.
func (p *presentImages) forget() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen = nil
}
