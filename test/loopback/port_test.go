package loopback

import "testing"

// Ports are unique in a process, even once released, and outside the
// kernel's ephemeral range. Without the record of given ports, 2,000 draws
// from about 22,000 would repeat one almost surely.
func TestFreePortNeverRepeatsAndAvoidsEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	seen := map[int]bool{}
	for range 2000 {
		port, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if seen[port] {
			t.Fatalf("port %d returned twice", port)
		}
		if port < freePortFloor || port >= low {
			t.Fatalf("port %d is outside %d-%d", port, freePortFloor, low-1)
		}
		seen[port] = true
	}
}
