// Package certs is Olivares' PKI: the certificate authority, the coordinator's
// server certificates, node certificates signed from a CSR, and root rotation.
//
// certs never sees a node's private key: a node sends a CSR, and the node's
// identity always comes from the id the coordinator assigns (from the join
// token), never from the CSR. Only the CSR's public key is used.
//
// # Files in the authority directory
//
//	ca.pem            current root (signs every new certificate)
//	ca-key.pem        its private key, mode 0600
//	ca-next.pem       second trusted root, optional
//	ca-next-key.pem   its private key, mode 0600
//	ca-next.state     "upcoming" or "retiring": the role of ca-next.pem
//	ca-pending.pem    present only while a change is being written (see below)
//
// A change that touches several files (InitAuthority, Rotate, Promote) first
// writes the whole new state to ca-pending.pem in one atomic rename, then
// rewrites the files above, then removes ca-pending.pem. If the process dies in
// between, the next LoadAuthority finishes the change from ca-pending.pem, so
// a key is never paired with the wrong certificate.
//
// # Rotation
//
// A root is replaced in three steps, each at least one node-certificate
// lifetime (DefaultNodeValidity) apart so that every node renews in between:
//
//  1. Rotate adds an upcoming root. Both roots are trusted (Pool, BundlePEM);
//     nodes pick up the bundle at their next renewal. Current still signs.
//  2. Promote makes the upcoming root Current; the old root becomes the
//     retiring Next, still trusted, so node certificates it signed keep working
//     until they renew.
//  3. The next Rotate drops the retiring root and adds a fresh upcoming one.
//     A node certificate still signed by the dropped root stops verifying.
package certs
