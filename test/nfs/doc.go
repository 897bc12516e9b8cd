// Package nfs holds the shared-filesystem test suite: a runner on one NFS
// client and masters on another, against a real Linux NFS server. The
// tests skip unless NFS_A and NFS_B name the two client mounts of one
// export; test/nfs/run-nfs-tests.sh (make test-nfs) boots a User-Mode Linux
// guest that provides them and runs the prebuilt test binary inside.
package nfs
