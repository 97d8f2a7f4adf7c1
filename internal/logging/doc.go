// Package logging builds dair's zap loggers and routes protoactor-go's slog output into them.
//
// Every dair process logs through one *zap.Logger built by New. The actor system logs through
// log/slog; ActorLoggerFactory adapts the zap logger for actor.WithLoggerFactory so that
// protoactor's records land in the same sink, tagged with the actor system id. Tests silence
// protoactor with Discard.
//
// # Usage
//
//	logger, err := logging.New(logging.Config{Level: "info", Format: "json"})
//	if err != nil {
//		return fmt.Errorf("build logger: %w", err)
//	}
//	system := actor.NewActorSystem(actor.WithLoggerFactory(logging.ActorLoggerFactory(logger)))
//
// In tests:
//
//	system := actor.NewActorSystem(actor.WithLoggerFactory(logging.Discard()))
package logging
