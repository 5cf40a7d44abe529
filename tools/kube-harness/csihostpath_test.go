package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

var mountCap = []*csi.VolumeCapability{{
	AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
	AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
}}

func wantCode(t *testing.T, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("got %v, want code %s", err, code)
	}
}

func TestHostpathVolumeSnapshotRestore(t *testing.T) {
	ctx := context.Background()
	d := &hostpathDriver{root: t.TempDir(), nodeID: realNodeName}
	vol, err := d.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: mountCap,
		CapacityRange: &csi.CapacityRange{RequiredBytes: 2 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	if vol.Volume.VolumeId != "pvc-1" || vol.Volume.CapacityBytes != 2<<20 {
		t.Fatalf("volume %+v", vol.Volume)
	}
	data := filepath.Join(d.root, "volumes", "pvc-1", "data")
	if fi, err := os.Stat(data); err != nil || fi.Mode().Perm() != 0o777 {
		t.Fatalf("data folder %v %v, want mode 0777", fi, err)
	}
	if err := os.WriteFile(filepath.Join(data, "hello"), []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The same request again is the same volume (the provisioner retries).
	if again, err := d.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: mountCap,
		CapacityRange: &csi.CapacityRange{RequiredBytes: 2 << 20}}); err != nil || again.Volume.CapacityBytes != 2<<20 {
		t.Fatalf("again: %v %v", again, err)
	}

	snap, err := d.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snapshot-1", SourceVolumeId: "pvc-1"})
	if err != nil {
		t.Fatal(err)
	}
	if s := snap.Snapshot; !s.ReadyToUse || s.SizeBytes != 2<<20 || s.SourceVolumeId != "pvc-1" || s.SnapshotId != "snapshot-1" {
		t.Fatalf("snapshot %+v", s)
	}
	// A snapshot is a copy: later writes to the volume are not in it.
	if err := os.WriteFile(filepath.Join(data, "hello"), []byte("two"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = d.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snapshot-1", SourceVolumeId: "pvc-2"})
	wantCode(t, err, codes.AlreadyExists)

	// A restore smaller than the snapshot is refused; one as large has the snapshot's files.
	_, err = d.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-small", VolumeCapabilities: mountCap,
		CapacityRange:       &csi.CapacityRange{RequiredBytes: 1 << 20},
		VolumeContentSource: snapshotSource("snapshot-1")})
	wantCode(t, err, codes.OutOfRange)
	restored, err := d.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-2", VolumeCapabilities: mountCap,
		CapacityRange:       &csi.CapacityRange{RequiredBytes: 2 << 20},
		VolumeContentSource: snapshotSource("snapshot-1")})
	if err != nil {
		t.Fatal(err)
	}
	if restored.Volume.ContentSource.GetSnapshot().GetSnapshotId() != "snapshot-1" {
		t.Fatalf("restored volume's source %+v", restored.Volume.ContentSource)
	}
	if got, err := os.ReadFile(filepath.Join(d.root, "volumes", "pvc-2", "data", "hello")); err != nil || string(got) != "one" {
		t.Fatalf("restored file %q %v, want the snapshot's \"one\"", got, err)
	}
	_, err = d.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-3", VolumeCapabilities: mountCap,
		VolumeContentSource: snapshotSource("snapshot-missing")})
	wantCode(t, err, codes.NotFound)

	list, err := d.ListSnapshots(ctx, &csi.ListSnapshotsRequest{SnapshotId: "snapshot-1"})
	if err != nil || len(list.Entries) != 1 || list.Entries[0].Snapshot.SnapshotId != "snapshot-1" {
		t.Fatalf("list by ID: %+v %v", list, err)
	}
	if list, err := d.ListSnapshots(ctx, &csi.ListSnapshotsRequest{SourceVolumeId: "pvc-2"}); err != nil || len(list.Entries) != 0 {
		t.Fatalf("list by another volume: %+v %v", list, err)
	}
	if _, err := d.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: "snapshot-1"}); err != nil {
		t.Fatal(err)
	}
	if list, err := d.ListSnapshots(ctx, &csi.ListSnapshotsRequest{}); err != nil || len(list.Entries) != 0 {
		t.Fatalf("after delete: %+v %v", list, err)
	}
	// Deleting twice is fine (the sidecars retry); the restored volume stays.
	if _, err := d.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: "snapshot-1"}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"pvc-1", "pvc-1"} {
		if _, err := d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(d.root, "volumes", "pvc-2", "data", "hello")); err != nil {
		t.Fatal(err)
	}
	left, _ := os.ReadDir(filepath.Join(d.root, "volumes"))
	if len(left) != 1 || left[0].Name() != "pvc-2" {
		t.Fatalf("volumes left: %v", left)
	}
}

func snapshotSource(id string) *csi.VolumeContentSource {
	return &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
		Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: id},
	}}
}

func TestHostpathRefuses(t *testing.T) {
	ctx := context.Background()
	d := &hostpathDriver{root: t.TempDir()}
	block := []*csi.VolumeCapability{{AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}}}
	_, err := d.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: block})
	wantCode(t, err, codes.InvalidArgument)
	_, err = d.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-1"})
	wantCode(t, err, codes.InvalidArgument)
	for _, name := range []string{"", "..", "../x", "a/b", ".hidden"} {
		_, err = d.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: name, VolumeCapabilities: mountCap})
		wantCode(t, err, codes.InvalidArgument)
	}
	_, err = d.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snapshot-1", SourceVolumeId: "pvc-none"})
	wantCode(t, err, codes.NotFound)
	_, err = d.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "pvc-none", TargetPath: "/x", VolumeCapability: mountCap[0]})
	wantCode(t, err, codes.NotFound)
	_, err = d.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "pvc-none", TargetPath: "relative", VolumeCapability: mountCap[0]})
	wantCode(t, err, codes.InvalidArgument)
	_, err = d.ListSnapshots(ctx, &csi.ListSnapshotsRequest{StartingToken: "2"})
	wantCode(t, err, codes.Aborted)
}

func TestHostpathCapabilities(t *testing.T) {
	ctx := context.Background()
	d := &hostpathDriver{root: t.TempDir(), nodeID: realNodeName}
	info, _ := d.GetPluginInfo(ctx, nil)
	if info.Name != csiDriverName {
		t.Fatalf("name %s", info.Name)
	}
	caps, _ := d.ControllerGetCapabilities(ctx, nil)
	var got []csi.ControllerServiceCapability_RPC_Type
	for _, c := range caps.Capabilities {
		got = append(got, c.GetRpc().GetType())
	}
	for _, want := range []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
		csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS,
	} {
		if !slices.Contains(got, want) {
			t.Errorf("controller capabilities %v lack %s", got, want)
		}
	}
	plugin, _ := d.GetPluginCapabilities(ctx, nil)
	if len(plugin.Capabilities) != 1 || plugin.Capabilities[0].GetService().GetType() != csi.PluginCapability_Service_CONTROLLER_SERVICE {
		t.Errorf("plugin capabilities %v", plugin.Capabilities)
	}
	node, _ := d.NodeGetInfo(ctx, nil)
	if node.NodeId != realNodeName {
		t.Errorf("node ID %s", node.NodeId)
	}
	p := pluginInfo("/run/x/csi.sock")
	if p.Type != registerapi.CSIPlugin || p.Name != csiDriverName || p.Endpoint != "/run/x/csi.sock" || !slices.Contains(p.SupportedVersions, "1.0.0") {
		t.Errorf("plugin info %+v", p)
	}
	if got := csiRegistrationSocket("/k"); got != "/k/plugins_registry/hostpath.csi.k8s.io-reg.sock" {
		t.Errorf("registration socket %s", got)
	}
	if c := volumeCapacity(nil); c != csiDefaultCapacity {
		t.Errorf("default capacity %d", c)
	}
	if c := volumeCapacity(&csi.CapacityRange{LimitBytes: 5}); c != 5 {
		t.Errorf("capacity from the limit %d", c)
	}
}

func TestMountinfoHas(t *testing.T) {
	info := strings.Join([]string{
		`36 35 98:0 / /mnt/a\040b rw,noatime master:1 - ext3 /dev/root rw`,
		`37 35 98:0 /vol /var/lib/kubelet/pods/x/volumes/kubernetes.io~csi/pv/mount rw shared:2 - ext4 /dev/vda rw`,
	}, "\n")
	for path, want := range map[string]bool{
		"/mnt/a b": true,
		"/var/lib/kubelet/pods/x/volumes/kubernetes.io~csi/pv/mount": true,
		"/var/lib/kubelet/pods/x/volumes/kubernetes.io~csi/pv":       false,
		"/mnt/a":   false,
		"/dev/vda": false,
	} {
		if got := mountinfoHas(info, path); got != want {
			t.Errorf("%s: %v, want %v", path, got, want)
		}
	}
}
