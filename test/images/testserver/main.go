// Command testserver is the program of the test image: an HTTP server whose
// answers let end-to-end tests look inside a running container.
//
//	GET /            "ok <hostname>"
//	GET /env?name=X  the value of environment variable X
//	GET /file?path=P the content of file P
//	PUT /file?path=P writes the body to file P
//	GET /healthz     200 while healthy, 500 after POST /unhealthy (POST /healthy heals)
//
// With -grpc-listen it also serves grpc.health.v1, following the same switch;
// -unhealthy starts it unhealthy. With -log-probes it prints
// "probe <unix nanoseconds>" for every /healthz request, so a benchmark can
// measure probe intervals on the receiving end.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func main() {
	addr := flag.String("listen", ":8080", "address to listen on")
	grpcAddr := flag.String("grpc-listen", "", "address of the gRPC health service (none if empty)")
	startUnhealthy := flag.Bool("unhealthy", false, "start unhealthy")
	logProbes := flag.Bool("log-probes", false, "print the time of every /healthz request")
	flag.Parse()
	var unhealthy atomic.Bool
	unhealthy.Store(*startUnhealthy)
	hs := health.NewServer()
	setHealth := func(bad bool) {
		unhealthy.Store(bad)
		st := healthpb.HealthCheckResponse_SERVING
		if bad {
			st = healthpb.HealthCheckResponse_NOT_SERVING
		}
		hs.SetServingStatus("", st)
	}
	setHealth(*startUnhealthy)
	if *grpcAddr != "" {
		l, err := net.Listen("tcp", *grpcAddr)
		if err != nil {
			log.Fatal(err)
		}
		srv := grpc.NewServer()
		healthpb.RegisterHealthServer(srv, hs)
		go func() { log.Fatal(srv.Serve(l)) }()
	}
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
		if *logProbes {
			fmt.Printf("probe %d\n", time.Now().UnixNano())
		}
		if unhealthy.Load() {
			http.Error(w, "unhealthy", http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/unhealthy", func(w http.ResponseWriter, r *http.Request) { setHealth(true) })
	mux.HandleFunc("/healthy", func(w http.ResponseWriter, r *http.Request) { setHealth(false) })
	log.Printf("testserver listening on %s", *addr)
	log.Fatal(http.ListenAndServe(*addr, mux))
}
