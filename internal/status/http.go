package status

import (
	"context"
	"encoding/json"
	"html/template"
	"log/slog"
	"net/http"
	"time"
)

// readTimeout bounds the queries of one request.
const readTimeout = 10 * time.Second

// Handler serves the Report: JSON at GET /api/v1/status, and a small page
// rendering it at GET /status. It does not authenticate; the caller
// mounts it behind the same basic authentication as River UI.
type Handler struct {
	q      Querier
	opts   Options
	logger *slog.Logger
}

// NewHandler returns the handler.
func NewHandler(q Querier, opts Options, logger *slog.Logger) *Handler {
	return &Handler{q: q, opts: opts, logger: logger}
}

// Mount registers the two routes on mux, each wrapped by protect.
func (h *Handler) Mount(mux *http.ServeMux, protect func(http.Handler) http.Handler) {
	mux.Handle("GET /api/v1/status", protect(http.HandlerFunc(h.serveJSON)))
	mux.Handle("GET /status", protect(http.HandlerFunc(h.servePage)))
}

func (h *Handler) read(w http.ResponseWriter, r *http.Request) (Report, bool) {
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	rep, err := Read(ctx, h.q, h.opts)
	if err != nil {
		h.logger.WarnContext(ctx, "the status could not be read", slog.String("error", err.Error()))
		http.Error(w, "the status could not be read from the database", http.StatusServiceUnavailable)
		return rep, false
	}
	return rep, true
}

func (h *Handler) serveJSON(w http.ResponseWriter, r *http.Request) {
	rep, ok := h.read(w, r)
	if !ok {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(rep)
}

func (h *Handler) servePage(w http.ResponseWriter, r *http.Request) {
	rep, ok := h.read(w, r)
	if !ok {
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_ = page.Execute(w, rep)
}

var page = template.Must(template.New("status").Funcs(template.FuncMap{
	"age": func(s *float64) string {
		if s == nil {
			return "never"
		}
		return (time.Duration(*s) * time.Second).Round(time.Second).String() + " ago"
	},
	"in":    func(s float64) string { return (time.Duration(s) * time.Second).Round(time.Second).String() },
	"bytes": Bytes,
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>MailFathom status</title>
<meta http-equiv="refresh" content="15">
<style>body{font:14px system-ui,sans-serif;margin:2em}table{border-collapse:collapse;margin:.5em 0 1.5em}
td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left}th{background:#f4f4f4}.bad{color:#b00}</style></head>
<body><h1>MailFathom status</h1>
<p>As of {{.GeneratedAt.Format "2006-01-02 15:04:05 MST"}}. Synchronization {{if .SyncEnabled}}enabled{{else}}disabled{{end}}.
<a href="/api/v1/status">JSON</a> · <a href="/riverui/">River UI</a></p>
<p>{{with .Embedding}}Embedding {{.Model}} ({{.Dimensions}} dimensions{{with .AnsweredModel}}; vectors of model {{.}}, as the provider answered{{end}}): {{.BacklogJobs}} embed job(s) waiting, {{.AwaitingMessages}} message(s) awaiting vectors, {{if .RefusedPassages}}<span class="bad">{{.RefusedPassages}} passage(s) refused by the provider</span> (not offered again until their text changes){{else}}no passage refused by the provider{{end}}.{{else}}Embedding: no profile configured.{{end}}</p>
{{range .Accounts}}<h2>{{.ID}}</h2>
<p>Mode {{.ConfiguredMode}}.
{{with .Compression}}Compression {{if .InUse}}on{{else}}off{{end}}: {{.Reason}}.{{end}}
{{with .NextRun}}Next run: {{.Why}}{{if gt .InSeconds 0.0}}, in {{in .InSeconds}}{{end}}.{{else}}No run is coming.{{end}}
{{with .Throttled}}<span class="bad">Throttled by the server until {{.Until.Format "2006-01-02 15:04:05 MST"}} ({{.Reason}}{{with .SuggestedDelaySeconds}}, suggested wait {{in .}}{{end}}); its work waits, no failure is counted.</span>{{end}}
{{with .DownloadBudget}}Download budget: {{bytes .UsedBytes}} of {{bytes .BytesPerDay}} used in the last {{.WindowHours}} h{{with .ContinuesAt}}; <span class="bad">reached, continues at {{.Format "2006-01-02 15:04:05 MST"}}</span>{{end}}.{{end}}
{{if .ConsecutiveFailures}}<span class="bad">{{.ConsecutiveFailures}} failed run(s) in a row; backoff {{in .BackoffSeconds}}.</span>{{end}}
{{with .LastFailure}}Last failure: <span class="bad">{{.Identity}}</span> at {{.At.Format "2006-01-02 15:04:05"}}.{{end}}
{{with .Mutations.CompletedUnjoined}}{{.}} move(s) or copy(ies) completed, unjoined: the server named no placement.{{end}}
{{with .LastFailedMutation}}Last failed mutation: <span class="bad">{{.ID}} ({{.Kind}}, {{.State}}, code {{.FailureCode}})</span> at {{.At.Format "2006-01-02 15:04:05"}}.{{end}}</p>
<table><tr><th>Alias</th><th>Mode</th><th>Last successful pass</th><th>Stored</th><th>Oversized</th><th>Withheld</th><th>Tombstoned</th><th>Checkpoint (UIDVALIDITY/UID of UIDNEXT)</th><th>Mutations pending/converging/dead-lettered</th><th>Awaiting vectors</th><th>Last failure</th></tr>
{{range .Folders}}<tr><td>{{.Alias}}</td><td>{{.EffectiveMode}}{{with .Unresolved}} <span class="bad">(unresolved: {{.}})</span>{{end}}</td><td>{{age .LastSuccessAgeSeconds}}</td>
<td>{{.Messages.Stored}}</td><td>{{.Messages.Oversized}}</td><td>{{.Messages.Withheld}}</td><td>{{.Messages.Tombstoned}}</td>
<td>{{.Checkpoint.UIDValidity}}/{{.Checkpoint.LastSeenUID}}{{with .Checkpoint.ExaminedUIDNext}} of {{.}}{{end}}</td>
<td>{{.Mutations.Pending}}/{{.Mutations.Converging}}/{{if .Mutations.DeadLettered}}<span class="bad">{{.Mutations.DeadLettered}}</span>{{else}}0{{end}}</td><td>{{with .AwaitingVectors}}{{.}}{{else}}-{{end}}</td><td>{{with .LastFailure}}<span class="bad">{{.Identity}}</span>{{end}}</td></tr>
{{end}}</table>{{end}}
</body></html>
`))
