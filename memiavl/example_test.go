package memiavl_test

import (
	"fmt"
	"log"

	ics23 "github.com/cosmos/ics23/go"

	"github.com/seed-6dfbb450/memiavl/memiavl"
)

// A tree in memory: writes, saved versions whose root hashes are those
// cosmos/iavl gives for the same writes, an ordered iteration, and an ICS23
// proof verified against the root hash.
func ExampleTree() {
	tree, err := memiavl.New(memiavl.Options{})
	if err != nil {
		log.Fatal(err)
	}
	for _, kv := range [][2]string{{"alice", "10"}, {"bob", "20"}, {"carol", "30"}} {
		if _, err := tree.Set([]byte(kv[0]), []byte(kv[1])); err != nil {
			log.Fatal(err)
		}
	}
	hash, version, err := tree.SaveVersion()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("version %d root hash %X\n", version, hash)

	if _, err := tree.Remove([]byte("bob")); err != nil {
		log.Fatal(err)
	}
	hash, version, err = tree.SaveVersion()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("version %d root hash %X\n", version, hash)

	it := tree.Iterator(nil, nil, true)
	for ; it.Valid(); it.Next() {
		fmt.Printf("%s=%s\n", it.Key(), it.Value())
	}
	if err := it.Close(); err != nil {
		log.Fatal(err)
	}

	proof, err := tree.GetMembershipProof([]byte("carol"))
	if err != nil {
		log.Fatal(err)
	}
	ok := ics23.VerifyMembership(ics23.IavlSpec, hash, proof, []byte("carol"), []byte("30"))
	fmt.Println("proof of carol verifies:", ok)
	absent, err := tree.GetNonMembershipProof([]byte("bob"))
	if err != nil {
		log.Fatal(err)
	}
	ok = ics23.VerifyNonMembership(ics23.IavlSpec, hash, absent, []byte("bob"))
	fmt.Println("proof of bob's absence verifies:", ok)
	// Output:
	// version 1 root hash 5D44CE7C33B628B7ACD3A74BF4FE7231C5F10D8F12679168C03FEBFD73F5F90E
	// version 2 root hash 5EC28D5E1A5D0FE72C8A70C57B6CCECB4D497C69CD449D6FD00A4D2A2346A0D0
	// alice=10
	// carol=30
	// proof of carol verifies: true
	// proof of bob's absence verifies: true
}
