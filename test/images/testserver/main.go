// Command testserver is the program of the test image: an HTTP server whose
// answers let end-to-end tests look inside a running container.
//
//	GET /            "ok <hostname>"
//	GET /env?name=X  the value of environment variable X
//	GET /file?path=P the content of file P
//	PUT /file?path=P writes the body to file P
//	GET /healthz     200 while healthy, 500 after POST /unhealthy
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"sync/atomic"
)

func main() {
	addr := flag.String("listen", ":8080", "address to listen on")
	flag.Parse()
	var unhealthy atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		h, _ := os.Hostname()
		fmt.Fprintf(w, "ok %s\n", h)
	})
	mux.HandleFunc("/env", func(w http.ResponseWriter, r *http.Request) {
		v, ok := os.LookupEnv(r.URL.Query().Get("name"))
		if !ok {
			http.Error(w, "unset", http.StatusNotFound)
			return
		}
		fmt.Fprint(w, v)
	})
	mux.HandleFunc("/file", func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Query().Get("path")
		switch r.Method {
		case http.MethodPut:
			data, _ := io.ReadAll(r.Body)
			if err := os.WriteFile(p, data, 0o644); err != nil {
				http.Error(w, err.Error(), http.StatusForbidden)
				return
			}
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				http.Error(w, err.Error(), http.StatusNotFound)
				return
			}
			w.Write(data)
		}
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if unhealthy.Load() {
			http.Error(w, "unhealthy", http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/unhealthy", func(w http.ResponseWriter, r *http.Request) {
		unhealthy.Store(true)
	})
	log.Printf("testserver listening on %s", *addr)
	log.Fatal(http.ListenAndServe(*addr, mux))
}
