package cliruntime

// ProtocolCommand is Launch and Resume for a tool that resumes in its
// protocol (Codex thread/resume, ACP session/load), not on argv: both start
// the same command line; they differ only in what they require of
// LaunchSpec.ConversationID.
type ProtocolCommand struct {
	// Name is the program when LaunchSpec.Binary is empty.
	Name string
	// Args follow the program name.
	Args []string
	// Vars are the tool's own variables, derived from the profile home.
	Vars func(home string) []EnvVar
	// CheckID validates a stored conversation id for Resume.
	CheckID func(id string) error
}

// Launch refuses a conversation id: a launch starts a new one.
func (p ProtocolCommand) Launch(spec LaunchSpec) (Command, error) {
	if spec.ConversationID != "" {
		return Command{}, ErrUnexpectedConversation
	}
	return p.command(spec)
}

// Resume needs a well-formed stored conversation id (R-RES-1).
func (p ProtocolCommand) Resume(spec LaunchSpec) (Command, error) {
	if err := p.CheckID(spec.ConversationID); err != nil {
		return Command{}, err
	}
	return p.command(spec)
}

func (p ProtocolCommand) command(spec LaunchSpec) (Command, error) {
	var vars []EnvVar
	if p.Vars != nil {
		vars = p.Vars(spec.Home)
	}
	env, err := BuildEnv(spec, vars...)
	if err != nil {
		return Command{}, err
	}
	path := spec.Binary
	if path == "" {
		path = p.Name
	}
	return Command{Path: path, Args: append([]string(nil), p.Args...), Env: env, Dir: spec.Workdir}, nil
}
