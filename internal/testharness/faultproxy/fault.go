package faultproxy

// Direction selects which bytes a fault counts.
type Direction int

const (
	// ServerToClient counts bytes the server sends to the client.
	ServerToClient Direction = 1 << iota
	// ClientToServer counts bytes the client sends to the server.
	ClientToServer
	// Both counts the bytes of both directions together.
	Both = ServerToClient | ClientToServer
)

func (d Direction) String() string {
	switch d {
	case ServerToClient:
		return "server→client"
	case ClientToServer:
		return "client→server"
	case Both:
		return "both directions"
	}
	return "no direction"
}

// Scope selects which connections a fault applies to.
type Scope int

const (
	// Existing applies a fault to the connections open now; their bytes
	// are counted from the moment the fault is armed.
	Existing Scope = 1 << iota
	// Next applies a fault to the next connection accepted, counting
	// from its start, and then disarms it.
	Next
	// Future applies a fault to every connection accepted later,
	// counting from each one's start, until Heal.
	Future
	// All is Existing and Future together.
	All = Existing | Future
)

// action is what a fault does when its byte budget is spent.
type action int

const (
	cut   action = iota + 1 // close both sides
	stall                   // forward nothing more until Resume
)

// fault is an armed fault template for connections not yet accepted.
type fault struct {
	action action
	dir    Direction
	n      int64
}

// armed is a fault on one connection with the bytes it still lets pass.
type armed struct {
	action    action
	dir       Direction
	remaining int64
}
