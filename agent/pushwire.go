package agent

import (
	"errors"
	"fmt"

	"github.com/go-json-experiment/json/jsontext"
)

// UpdateKind says what a push notification carries.
type UpdateKind string

// Kinds of push notification.
const (
	UpdateTask     UpdateKind = "task"
	UpdateStatus   UpdateKind = "status-update"
	UpdateArtifact UpdateKind = "artifact-update"
	UpdateMessage  UpdateKind = "message"
)

// Update is one push notification an agent posted, in either generation:
// a whole task, a status update, an artifact update or a message.
type Update struct {
	Kind       UpdateKind
	Generation string // V10 or V03
	TaskID     string
	ContextID  string
	// Task is the whole task (UpdateTask).
	Task *Task
	// Status is the task's new status (UpdateStatus).
	Status *TaskStatus
	// Artifact is the new or extended artifact (UpdateArtifact); Append
	// says its parts extend an artifact of the same id.
	Artifact *Artifact
	Append   bool
	// Message is the message (UpdateMessage).
	Message *Message
}

// streamResponse10 is A2A 1.0's StreamResponse, the body of a 1.0 push
// notification: exactly one of its members.
type streamResponse10 struct {
	Task           *Task           `json:"task"`
	Message        *Message        `json:"message"`
	StatusUpdate   *statusUpdate10 `json:"statusUpdate"`
	ArtifactUpdate *artifactUpd10  `json:"artifactUpdate"`
	// A bare Task (some senders post the task itself).
	ID   string         `json:"id"`
	Kind jsontext.Value `json:"kind"`
}

type statusUpdate10 struct {
	TaskID    string     `json:"taskId"`
	ContextID string     `json:"contextId"`
	Status    TaskStatus `json:"status"`
}

type artifactUpd10 struct {
	TaskID    string    `json:"taskId"`
	ContextID string    `json:"contextId"`
	Artifact  *Artifact `json:"artifact"`
	Append    bool      `json:"append"`
}

// statusUpdate03 and artifactUpdate03 are 0.3's TaskStatusUpdateEvent and
// TaskArtifactUpdateEvent.
type statusUpdate03 struct {
	TaskID    string       `json:"taskId"`
	ContextID string       `json:"contextId"`
	Status    status03Wire `json:"status"`
}

type status03Wire = struct {
	State     string     `json:"state"`
	Message   *message03 `json:"message"`
	Timestamp string     `json:"timestamp"`
}

type artifactUpdate03 struct {
	TaskID    string      `json:"taskId"`
	ContextID string      `json:"contextId"`
	Artifact  *artifact03 `json:"artifact"`
	Append    bool        `json:"append"`
}

// DecodeUpdate decodes the body of a push notification. A body with a
// "kind" member is A2A 0.3 (kind task, status-update, artifact-update or
// message, as the 0.3 SDKs post them); any other is A2A 1.0: a
// StreamResponse with exactly one of task, statusUpdate, artifactUpdate,
// message — or a bare Task. Every problem is an error naming the field.
func DecodeUpdate(b []byte) (*Update, error) {
	var probe struct {
		Kind *string `json:"kind"`
	}
	if err := unmarshalStrict(b, &probe); err != nil {
		return nil, fmt.Errorf("decode push notification: %w", err)
	}
	var u *Update
	var err error
	if probe.Kind != nil {
		u, err = decodeUpdate03(b, *probe.Kind)
	} else {
		u, err = decodeUpdate10(b)
	}
	if err != nil {
		return nil, fmt.Errorf("decode push notification: %w", err)
	}
	if u.TaskID == "" && u.Kind != UpdateMessage {
		return nil, errors.New("decode push notification: taskId: missing")
	}
	return u, nil
}

func decodeUpdate10(b []byte) (*Update, error) {
	var r streamResponse10
	if err := unmarshalStrict(b, &r); err != nil {
		return nil, err
	}
	n := 0
	for _, set := range []bool{r.Task != nil, r.Message != nil, r.StatusUpdate != nil, r.ArtifactUpdate != nil} {
		if set {
			n++
		}
	}
	u := &Update{Generation: V10}
	switch {
	case n > 1:
		return nil, fmt.Errorf("need exactly one of task, message, statusUpdate, artifactUpdate (got %d)", n)
	case n == 0 && r.ID != "":
		t, err := DecodeTask(b)
		if err != nil {
			return nil, err
		}
		u.Kind, u.Task, u.TaskID, u.ContextID = UpdateTask, t, t.ID, t.ContextID
	case n == 0:
		return nil, errors.New("need one of task, message, statusUpdate, artifactUpdate")
	case r.Task != nil:
		if err := r.Task.check("task"); err != nil {
			return nil, err
		}
		u.Kind, u.Task, u.TaskID, u.ContextID = UpdateTask, r.Task, r.Task.ID, r.Task.ContextID
	case r.Message != nil:
		if err := r.Message.check("message"); err != nil {
			return nil, err
		}
		u.Kind, u.Message, u.TaskID, u.ContextID = UpdateMessage, r.Message, r.Message.TaskID, r.Message.ContextID
	case r.StatusUpdate != nil:
		s := r.StatusUpdate
		if !knownStates[s.Status.State] {
			return nil, fmt.Errorf("statusUpdate.status.state: %q is not a known task state", clip(string(s.Status.State)))
		}
		if s.Status.Message != nil {
			if err := s.Status.Message.check("statusUpdate.status.message"); err != nil {
				return nil, err
			}
		}
		u.Kind, u.Status, u.TaskID, u.ContextID = UpdateStatus, &s.Status, s.TaskID, s.ContextID
	case r.ArtifactUpdate != nil:
		a := r.ArtifactUpdate
		if a.Artifact == nil {
			return nil, errors.New("artifactUpdate.artifact: missing")
		}
		if a.Artifact.ArtifactID == "" {
			return nil, errors.New("artifactUpdate.artifact.artifactId: missing")
		}
		u.Kind, u.Artifact, u.Append, u.TaskID, u.ContextID = UpdateArtifact, a.Artifact, a.Append, a.TaskID, a.ContextID
	}
	return u, nil
}

func decodeUpdate03(b []byte, kind string) (*Update, error) {
	u := &Update{Generation: V03}
	switch kind {
	case "task":
		t, err := DecodeTask03(b)
		if err != nil {
			return nil, err
		}
		u.Kind, u.Task, u.TaskID, u.ContextID = UpdateTask, t, t.ID, t.ContextID
	case "message":
		var m message03
		if err := unmarshalStrict(b, &m); err != nil {
			return nil, err
		}
		out, err := m.message("message")
		if err != nil {
			return nil, err
		}
		u.Kind, u.Message, u.TaskID, u.ContextID = UpdateMessage, out, out.TaskID, out.ContextID
	case "status-update":
		var s statusUpdate03
		if err := unmarshalStrict(b, &s); err != nil {
			return nil, err
		}
		// The status converts as a task's would.
		t := task03{Kind: "task", ID: s.TaskID, ContextID: s.ContextID, Status: s.Status}
		if s.TaskID == "" {
			return nil, errors.New("taskId: missing")
		}
		out, err := t.task()
		if err != nil {
			return nil, fmt.Errorf("status-update: %w", err)
		}
		u.Kind, u.Status, u.TaskID, u.ContextID = UpdateStatus, &out.Status, s.TaskID, s.ContextID
	case "artifact-update":
		var a artifactUpdate03
		if err := unmarshalStrict(b, &a); err != nil {
			return nil, err
		}
		if a.Artifact == nil {
			return nil, errors.New("artifact: missing")
		}
		if a.Artifact.ArtifactID == "" {
			return nil, errors.New("artifact.artifactId: missing")
		}
		ps, err := convParts03(a.Artifact.Parts, "artifact")
		if err != nil {
			return nil, err
		}
		u.Kind, u.TaskID, u.ContextID, u.Append = UpdateArtifact, a.TaskID, a.ContextID, a.Append
		u.Artifact = &Artifact{ArtifactID: a.Artifact.ArtifactID, Name: a.Artifact.Name,
			Description: a.Artifact.Description, Parts: ps, Metadata: a.Artifact.Metadata}
	default:
		return nil, fmt.Errorf("kind: %q is not task, status-update, artifact-update or message", clip(kind))
	}
	return u, nil
}
