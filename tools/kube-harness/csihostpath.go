// csihostpath.go is `kube-harness csi-hostpath`, the real tier's CSI driver (docs/real-tier.md,
// "Volumes and snapshots"): a host-path driver named hostpath.csi.k8s.io whose volumes are
// folders on the node and whose snapshots are copies of them. It serves the CSI Identity,
// Controller (volumes, snapshots, snapshots listed) and Node services on one unix socket, and
// registers itself with the kubelet through the kubelet's plugin registration folder, as
// node-driver-registrar would. The Kubernetes CSI project's own host-path driver and
// node-driver-registrar are not served by the Go module proxy these machines reach, so the
// harness carries this one; the sidecars that drive it (external-provisioner, csi-snapshotter)
// and snapshot-controller are the upstream ones, built from their modules.
//
// It runs inside the node's mount namespace (started by `up --real` with nsenter, as the kubelet
// is): NodePublishVolume bind-mounts a volume's folder on the target the kubelet names, and
// that mount must be in the namespace where the kubelet and containerd look.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

const (
	csiDriverName = "hostpath.csi.k8s.io"
	// csiDefaultCapacity is a volume's size when its claim asks for none.
	csiDefaultCapacity = 1 << 20
)

// csiIDPattern is what a volume or snapshot ID (the name the sidecars give: pvc-<uid>,
// snapshot-<uid>) may hold: it names a folder.
var csiIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// csiMeta is a volume's or snapshot's meta.json beside its data folder.
type csiMeta struct {
	Capacity int64 `json:"capacity"`
	// Source is a snapshot's volume, or the snapshot a volume was restored from.
	Source  string `json:"source,omitempty"`
	Created int64  `json:"created"` // Unix nanoseconds
}

// hostpathDriver keeps volumes in <root>/volumes/<id>/data and snapshots in
// <root>/snapshots/<id>/data, each with its meta.json; a folder appears under its final name
// only once complete (copied under a temporary name, then renamed).
type hostpathDriver struct {
	root   string
	nodeID string
	mu     sync.Mutex // one change at a time: the sidecars retry, and may overlap

	csi.UnimplementedIdentityServer
	csi.UnimplementedControllerServer
	csi.UnimplementedNodeServer
}

func (d *hostpathDriver) dir(kind, id string) string { return filepath.Join(d.root, kind, id) }

func (d *hostpathDriver) readMeta(kind, id string) (csiMeta, error) {
	var m csiMeta
	data, err := os.ReadFile(filepath.Join(d.dir(kind, id), "meta.json"))
	if err != nil {
		return m, err
	}
	return m, json.Unmarshal(data, &m)
}

// create makes <root>/<kind>/<id> with meta and data copied from src (an empty folder when src
// is ""), atomically.
func (d *hostpathDriver) create(kind, id, src string, m csiMeta) error {
	tmp := d.dir(kind, "."+id+".tmp")
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return err
	}
	data := filepath.Join(tmp, "data")
	if src == "" {
		if err := os.Mkdir(data, 0o777); err != nil {
			return err
		}
		// Containers of any user write there, as on a fresh disk owned by root with mode 0777.
		if err := os.Chmod(data, 0o777); err != nil {
			return err
		}
	} else if out, err := exec.Command("cp", "-a", src, data).CombinedOutput(); err != nil {
		return fmt.Errorf("copy %s: %v: %s", src, err, strings.TrimSpace(string(out)))
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, "meta.json"), b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, d.dir(kind, id))
}

// Identity.

func (d *hostpathDriver) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: csiDriverName, VendorVersion: "sandcastle-harness"}, nil
}

func (d *hostpathDriver) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{{
		Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: csi.PluginCapability_Service_CONTROLLER_SERVICE}},
	}}}, nil
}

func (d *hostpathDriver) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil
}

// Controller.

func controllerCaps(types ...csi.ControllerServiceCapability_RPC_Type) []*csi.ControllerServiceCapability {
	var caps []*csi.ControllerServiceCapability
	for _, t := range types {
		caps = append(caps, &csi.ControllerServiceCapability{
			Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: t}},
		})
	}
	return caps
}

func (d *hostpathDriver) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: controllerCaps(
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
		csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS,
	)}, nil
}

// checkCapabilities accepts filesystem volumes only (a folder cannot be a block device).
func checkCapabilities(caps []*csi.VolumeCapability) error {
	if len(caps) == 0 {
		return status.Error(codes.InvalidArgument, "no volume capabilities")
	}
	for _, c := range caps {
		if c.GetMount() == nil {
			return status.Error(codes.InvalidArgument, "only filesystem volumes (access type mount) are supported")
		}
	}
	return nil
}

func checkID(what, id string) error {
	if !csiIDPattern.MatchString(id) {
		return status.Errorf(codes.InvalidArgument, "%s %q: want letters, digits, '.', '_' and '-'", what, id)
	}
	return nil
}

// volumeCapacity is what a volume asking for r gets: its required size, else its limit, else
// csiDefaultCapacity. Nothing enforces it: a folder has no size.
func volumeCapacity(r *csi.CapacityRange) int64 {
	if r.GetRequiredBytes() > 0 {
		return r.GetRequiredBytes()
	}
	if r.GetLimitBytes() > 0 {
		return r.GetLimitBytes()
	}
	return csiDefaultCapacity
}

func (d *hostpathDriver) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if err := checkID("volume name", req.GetName()); err != nil {
		return nil, err
	}
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return nil, err
	}
	if req.GetVolumeContentSource().GetVolume() != nil {
		return nil, status.Error(codes.InvalidArgument, "cloning a volume is not supported")
	}
	capacity := volumeCapacity(req.GetCapacityRange())
	snapshotID := req.GetVolumeContentSource().GetSnapshot().GetSnapshotId()
	d.mu.Lock()
	defer d.mu.Unlock()
	id := req.GetName()
	if m, err := d.readMeta("volumes", id); err == nil {
		if m.Source != snapshotID || (req.GetCapacityRange().GetLimitBytes() > 0 && m.Capacity > req.GetCapacityRange().GetLimitBytes()) {
			return nil, status.Errorf(codes.AlreadyExists, "volume %s exists with another source or size", id)
		}
		return volumeResponse(id, m), nil
	}
	src := ""
	if snapshotID != "" {
		if err := checkID("snapshot", snapshotID); err != nil {
			return nil, err
		}
		sm, err := d.readMeta("snapshots", snapshotID)
		if err != nil {
			return nil, status.Errorf(codes.NotFound, "snapshot %s: %v", snapshotID, err)
		}
		if sm.Capacity > capacity {
			return nil, status.Errorf(codes.OutOfRange, "snapshot %s is %d bytes, the volume %d", snapshotID, sm.Capacity, capacity)
		}
		src = filepath.Join(d.dir("snapshots", snapshotID), "data")
	}
	m := csiMeta{Capacity: capacity, Source: snapshotID, Created: time.Now().UnixNano()}
	if err := d.create("volumes", id, src, m); err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s: %v", id, err)
	}
	return volumeResponse(id, m), nil
}

func volumeResponse(id string, m csiMeta) *csi.CreateVolumeResponse {
	v := &csi.Volume{VolumeId: id, CapacityBytes: m.Capacity}
	if m.Source != "" {
		v.ContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
			Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: m.Source},
		}}
	}
	return &csi.CreateVolumeResponse{Volume: v}
}

func (d *hostpathDriver) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	if err := checkID("volume", req.GetVolumeId()); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := os.RemoveAll(d.dir("volumes", req.GetVolumeId())); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.DeleteVolumeResponse{}, nil
}

func (d *hostpathDriver) ValidateVolumeCapabilities(_ context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	if _, err := d.readMeta("volumes", req.GetVolumeId()); err != nil {
		return nil, status.Errorf(codes.NotFound, "volume %s", req.GetVolumeId())
	}
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: err.Error()}, nil
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeCapabilities: req.GetVolumeCapabilities(),
	}}, nil
}

func snapshotOf(id string, m csiMeta) *csi.Snapshot {
	return &csi.Snapshot{
		SnapshotId: id, SourceVolumeId: m.Source, SizeBytes: m.Capacity, ReadyToUse: true,
		CreationTime: timestamppb.New(time.Unix(0, m.Created)),
	}
}

// CreateSnapshot copies the volume's folder as it is now; it is ready when this answers. Its
// size is the volume's capacity, so that a restore asks for at least as much.
func (d *hostpathDriver) CreateSnapshot(_ context.Context, req *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	if err := checkID("snapshot name", req.GetName()); err != nil {
		return nil, err
	}
	if err := checkID("source volume", req.GetSourceVolumeId()); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	id := req.GetName()
	if m, err := d.readMeta("snapshots", id); err == nil {
		if m.Source != req.GetSourceVolumeId() {
			return nil, status.Errorf(codes.AlreadyExists, "snapshot %s is of volume %s", id, m.Source)
		}
		return &csi.CreateSnapshotResponse{Snapshot: snapshotOf(id, m)}, nil
	}
	vm, err := d.readMeta("volumes", req.GetSourceVolumeId())
	if err != nil {
		return nil, status.Errorf(codes.NotFound, "volume %s: %v", req.GetSourceVolumeId(), err)
	}
	m := csiMeta{Capacity: vm.Capacity, Source: req.GetSourceVolumeId(), Created: time.Now().UnixNano()}
	if err := d.create("snapshots", id, filepath.Join(d.dir("volumes", m.Source), "data"), m); err != nil {
		return nil, status.Errorf(codes.Internal, "snapshot %s: %v", id, err)
	}
	return &csi.CreateSnapshotResponse{Snapshot: snapshotOf(id, m)}, nil
}

func (d *hostpathDriver) DeleteSnapshot(_ context.Context, req *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	if err := checkID("snapshot", req.GetSnapshotId()); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := os.RemoveAll(d.dir("snapshots", req.GetSnapshotId())); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.DeleteSnapshotResponse{}, nil
}

// ListSnapshots lists every snapshot, or the one named, or those of one volume, in one page.
// csi-snapshotter asks for a pre-provisioned VolumeSnapshotContent's snapshotHandle this way.
func (d *hostpathDriver) ListSnapshots(_ context.Context, req *csi.ListSnapshotsRequest) (*csi.ListSnapshotsResponse, error) {
	if req.GetStartingToken() != "" {
		return nil, status.Error(codes.Aborted, "no pages: every snapshot is in the first answer")
	}
	entries, err := os.ReadDir(filepath.Join(d.root, "snapshots"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, status.Error(codes.Internal, err.Error())
	}
	resp := &csi.ListSnapshotsResponse{}
	for _, e := range entries {
		id := e.Name()
		if strings.HasPrefix(id, ".") || (req.GetSnapshotId() != "" && id != req.GetSnapshotId()) {
			continue
		}
		m, err := d.readMeta("snapshots", id)
		if err != nil || (req.GetSourceVolumeId() != "" && m.Source != req.GetSourceVolumeId()) {
			continue
		}
		resp.Entries = append(resp.Entries, &csi.ListSnapshotsResponse_Entry{Snapshot: snapshotOf(id, m)})
	}
	return resp, nil
}

// Node.

func (d *hostpathDriver) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: d.nodeID}, nil
}

// NodeGetCapabilities: none; without STAGE_UNSTAGE_VOLUME the kubelet publishes a volume
// directly on each pod's target.
func (d *hostpathDriver) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{}, nil
}

func (d *hostpathDriver) NodePublishVolume(_ context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	if err := checkID("volume", req.GetVolumeId()); err != nil {
		return nil, err
	}
	target := req.GetTargetPath()
	if target == "" || !filepath.IsAbs(target) {
		return nil, status.Errorf(codes.InvalidArgument, "target path %q", target)
	}
	if err := checkCapabilities([]*csi.VolumeCapability{req.GetVolumeCapability()}); err != nil {
		return nil, err
	}
	src := filepath.Join(d.dir("volumes", req.GetVolumeId()), "data")
	if _, err := os.Stat(src); err != nil {
		return nil, status.Errorf(codes.NotFound, "volume %s: %v", req.GetVolumeId(), err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	mounted, err := isMountPoint(target)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if mounted {
		return &csi.NodePublishVolumeResponse{}, nil
	}
	// The kubelet makes the target's parent; the driver makes the target.
	if err := os.MkdirAll(target, 0o750); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if err := syscall.Mount(src, target, "", syscall.MS_BIND, ""); err != nil {
		return nil, status.Errorf(codes.Internal, "bind %s on %s: %v", src, target, err)
	}
	if req.GetReadonly() {
		if err := syscall.Mount("", target, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
			_ = syscall.Unmount(target, 0)
			return nil, status.Errorf(codes.Internal, "read-only %s: %v", target, err)
		}
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

func (d *hostpathDriver) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	target := req.GetTargetPath()
	if target == "" || !filepath.IsAbs(target) {
		return nil, status.Errorf(codes.InvalidArgument, "target path %q", target)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	mounted, err := isMountPoint(target)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if mounted {
		if err := syscall.Unmount(target, 0); err != nil {
			return nil, status.Errorf(codes.Internal, "unmount %s: %v", target, err)
		}
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// isMountPoint says whether path is a mount point in this mount namespace.
func isMountPoint(path string) (bool, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	return mountinfoHas(string(data), filepath.Clean(path)), nil
}

// mountinfoHas says whether a line of /proc/self/mountinfo mounts on path (field 5, with the
// kernel's octal escapes for space, tab, newline and backslash).
func mountinfoHas(mountinfo, path string) bool {
	unescape := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	for _, line := range strings.Split(mountinfo, "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && unescape.Replace(f[4]) == path {
			return true
		}
	}
	return false
}

// registrar answers the kubelet's plugin watcher: a CSI plugin, its name and socket.
type registrar struct {
	registerapi.UnimplementedRegistrationServer
	endpoint string
}

func (r *registrar) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return pluginInfo(r.endpoint), nil
}

func pluginInfo(endpoint string) *registerapi.PluginInfo {
	return &registerapi.PluginInfo{
		Type: registerapi.CSIPlugin, Name: csiDriverName, Endpoint: endpoint, SupportedVersions: []string{"1.0.0"},
	}
}

func (r *registrar) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if s.PluginRegistered {
		logf("csi-hostpath: registered with the kubelet")
	} else {
		logf("csi-hostpath: the kubelet refused the registration: %s", s.Error)
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

// csiRegistrationSocket is where the kubelet (--root-dir kubeletRoot) looks for plugins.
func csiRegistrationSocket(kubeletRoot string) string {
	return filepath.Join(kubeletRoot, "plugins_registry", csiDriverName+"-reg.sock")
}

func listenUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return net.Listen("unix", path)
}

// runCSIHostpath is `kube-harness csi-hostpath --root DIR --endpoint SOCKET --node NAME
// --kubelet-root DIR`.
func runCSIHostpath(args []string) int {
	fset := flag.NewFlagSet("csi-hostpath", flag.ContinueOnError)
	root := fset.String("root", "", "folder of the volumes and snapshots")
	endpoint := fset.String("endpoint", "", "the CSI unix socket to serve")
	node := fset.String("node", "", "this node's name (its CSI node ID)")
	kubeletRoot := fset.String("kubelet-root", "", "the kubelet's --root-dir: register there (empty: do not)")
	if err := fset.Parse(args); err != nil {
		return 2
	}
	if *root == "" || *endpoint == "" || *node == "" {
		fmt.Fprintln(os.Stderr, "usage: kube-harness csi-hostpath --root DIR --endpoint SOCKET --node NAME [--kubelet-root DIR]")
		return 2
	}
	for _, kind := range []string{"volumes", "snapshots"} {
		if err := os.MkdirAll(filepath.Join(*root, kind), 0o700); err != nil {
			fmt.Fprintln(os.Stderr, "csi-hostpath:", err)
			return 1
		}
	}
	d := &hostpathDriver{root: *root, nodeID: *node}
	srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		resp, err := h(ctx, req)
		if err != nil && !strings.HasSuffix(info.FullMethod, "/Probe") {
			logf("csi-hostpath: %s: %v", info.FullMethod, err)
		}
		return resp, err
	}))
	csi.RegisterIdentityServer(srv, d)
	csi.RegisterControllerServer(srv, d)
	csi.RegisterNodeServer(srv, d)
	l, err := listenUnix(*endpoint)
	if err != nil {
		fmt.Fprintln(os.Stderr, "csi-hostpath:", err)
		return 1
	}
	go func() { _ = srv.Serve(l) }()
	var reg *grpc.Server
	if *kubeletRoot != "" {
		rl, err := listenUnix(csiRegistrationSocket(*kubeletRoot))
		if err != nil {
			fmt.Fprintln(os.Stderr, "csi-hostpath:", err)
			return 1
		}
		reg = grpc.NewServer()
		registerapi.RegisterRegistrationServer(reg, &registrar{endpoint: *endpoint})
		go func() { _ = reg.Serve(rl) }()
	}
	logf("csi-hostpath: %s serving on %s, volumes in %s", csiDriverName, *endpoint, *root)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	<-sigs
	if reg != nil {
		reg.Stop()
		_ = os.Remove(csiRegistrationSocket(*kubeletRoot))
	}
	srv.Stop()
	return 0
}
