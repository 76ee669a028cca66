/*
 * The balancer of the upstreams with `pyngress_balancer` (upstream_balancer and upstream_balancer_verified).
 *
 * Each backend's endpoints are parsed once per worker, when its entry of the backends table is decoded: balancer.lua
 * makes a peers object per backend (ngx_http_pyngress_peers_new and _set; LuaJIT's GC releases it). The router hands
 * a request its backend's peers object and, when it chose the endpoint itself (hashing, ewma), its place
 * (ngx_http_pyngress_balance). The balancer then connects to that endpoint, else to the next of the object's round
 * robin, and after a failed try (proxy_next_upstream) to the one after, each at most once per request. A request
 * the router did not hand over (session affinity, an HTTPRoute rule's retry budget, an error page) goes to
 * balancer_by_lua, as every request did before.
 *
 * Why C: balancer_by_lua cost about 3,700 instructions a request, half of them ngx.balancer parsing the endpoint's
 * address from text again on every request.
 *
 * The choice must outlive the router's jump to the profile's named location, which clears the modules' contexts:
 * it rides on a cleanup of the request's pool, which also lets go of the peers object when the request ends (the
 * backends table may drop the object meanwhile; $upstream_addr still names one of its endpoints in the log phase).
 * Subrequests share the pool: a choice is only for the request it was made for, and only for its first upstream.
 */

#include "ngx_http_pyngress_module.h"


/* "[<IPv6 address>]:<port>" at the longest */
#define PG_PEER_NAME_LENGTH  (NGX_INET6_ADDRSTRLEN + sizeof("[]:65535") - 1)

/* One endpoint (an IP address and port: ngx_sockaddr_t would add room for a Unix path to each of them). */
typedef struct {
    struct sockaddr  *sockaddr;                 /* &address */
    socklen_t         socklen;
    ngx_str_t         name;                     /* "ip:port" as $upstream_addr shows it */
    union {
        struct sockaddr      sockaddr;
        struct sockaddr_in   sockaddr_in;
#if (NGX_HAVE_INET6)
        struct sockaddr_in6  sockaddr_in6;
#endif
    } address;
    u_char            text[PG_PEER_NAME_LENGTH];
} pg_peer_t;

typedef struct {
    ngx_uint_t   refs;        /* the Lua object's, and each request's that uses it */
    ngx_uint_t   count;
    ngx_uint_t   cursor;      /* round robin: the place used last */
    pg_peer_t    peers[];
} pg_peers_t;

typedef struct {
    ngx_http_request_t  *request;
    pg_peers_t          *peers;
    ngx_uint_t           index;        /* the endpoint of the try under way */
    ngx_uint_t           tries_made;
    unsigned             measure_ewma:1;
    unsigned             used:1;       /* by an upstream already, or forgotten */
} pg_choice_t;


pg_peers_t *ngx_http_pyngress_peers_new(int count);
int ngx_http_pyngress_peers_set(pg_peers_t *peers, int place, u_char *address, size_t len, int port);
void ngx_http_pyngress_peers_release(pg_peers_t *peers);
int ngx_http_pyngress_balance(ngx_http_request_t *r, pg_peers_t *peers, int place);
void ngx_http_pyngress_balance_forget(ngx_http_request_t *r);


/* A backend's peers object with room for `count` endpoints, set with ngx_http_pyngress_peers_set; NULL when out of
 * memory. Its round robin starts at a random place, so that workers do not all start at the first endpoint. */
pg_peers_t *
ngx_http_pyngress_peers_new(int count)
{
    pg_peers_t  *peers;

    if (count <= 0) {
        return NULL;
    }
    peers = ngx_calloc(sizeof(pg_peers_t) + (size_t) count * sizeof(pg_peer_t), ngx_cycle->log);
    if (peers == NULL) {
        return NULL;
    }
    peers->refs = 1;
    peers->count = count;
    peers->cursor = (ngx_uint_t) ngx_random() % count;
    return peers;
}


/* Endpoint `place` (from 0): `address` is an IPv4 address or an IPv6 one in brackets. 0, or -1 when it is not. */
int
ngx_http_pyngress_peers_set(pg_peers_t *peers, int place, u_char *address, size_t len, int port)
{
    pg_peer_t  *peer;
    in_addr_t   ipv4;

    if (place < 0 || (ngx_uint_t) place >= peers->count || port < 1 || port > 65535) {
        return -1;
    }
    peer = &peers->peers[place];
    peer->sockaddr = &peer->address.sockaddr;

#if (NGX_HAVE_INET6)
    if (len > 2 && address[0] == '[' && address[len - 1] == ']') {
        if (ngx_inet6_addr(address + 1, len - 2, peer->address.sockaddr_in6.sin6_addr.s6_addr) != NGX_OK) {
            return -1;
        }
        peer->address.sockaddr_in6.sin6_family = AF_INET6;
        peer->address.sockaddr_in6.sin6_port = htons((in_port_t) port);
        peer->socklen = sizeof(struct sockaddr_in6);
    } else
#endif
    {
        ipv4 = ngx_inet_addr(address, len);
        if (ipv4 == INADDR_NONE) {
            return -1;
        }
        peer->address.sockaddr_in.sin_family = AF_INET;
        peer->address.sockaddr_in.sin_port = htons((in_port_t) port);
        peer->address.sockaddr_in.sin_addr.s_addr = ipv4;
        peer->socklen = sizeof(struct sockaddr_in);
    }

    peer->name.data = peer->text;
    peer->name.len = ngx_sock_ntop(peer->sockaddr, peer->socklen, peer->text, PG_PEER_NAME_LENGTH, 1);
    return 0;
}


/* Lets go of one reference: the Lua object's (its GC), or a request's (its pool's cleanup). */
void
ngx_http_pyngress_peers_release(pg_peers_t *peers)
{
    if (peers != NULL && --peers->refs == 0) {
        ngx_free(peers);
    }
}


static void
pg_choice_cleanup(void *data)
{
    pg_choice_t  *choice = data;

    ngx_http_pyngress_peers_release(choice->peers);
}


/* The router's choice for `r` that no upstream used yet. */
static pg_choice_t *
pg_choice_of(ngx_http_request_t *r)
{
    pg_choice_t         *choice;
    ngx_pool_cleanup_t  *cln;

    for (cln = r->pool->cleanup; cln; cln = cln->next) {
        if (cln->handler == pg_choice_cleanup) {
            choice = cln->data;
            if (choice->request == r && !choice->used) {
                return choice;
            }
        }
    }
    return NULL;
}


/* The router's choice: `peers`, and `place` (from 1) when the router chose the endpoint, negative when ewma chose it
 * (the request is then measured), 0 for the round robin. 0, or -1 (out of memory, or no such place): the router
 * then hands the request to balancer_by_lua. */
int
ngx_http_pyngress_balance(ngx_http_request_t *r, pg_peers_t *peers, int place)
{
    ngx_uint_t           chosen = place < 0 ? (ngx_uint_t) -place : (ngx_uint_t) place;
    pg_choice_t         *choice;
    ngx_pool_cleanup_t  *cln;

    if (peers == NULL || chosen > peers->count) {
        return -1;
    }
    cln = ngx_pool_cleanup_add(r->pool, sizeof(pg_choice_t));
    if (cln == NULL) {
        return -1;
    }
    choice = cln->data;
    choice->request = r;
    choice->peers = peers;
    peers->refs++;
    cln->handler = pg_choice_cleanup;
    if (chosen == 0) {
        peers->cursor = (peers->cursor + 1) % peers->count;
        chosen = peers->cursor + 1;
    }
    choice->index = chosen - 1;
    choice->tries_made = 0;
    choice->measure_ewma = place < 0;
    choice->used = 0;
    return 0;
}


/* An error page's request takes another backend: the route's choice is not for it. */
void
ngx_http_pyngress_balance_forget(ngx_http_request_t *r)
{
    pg_choice_t  *choice;

    while ((choice = pg_choice_of(r)) != NULL) {
        choice->used = 1;
    }
}


static ngx_int_t
pg_get_peer(ngx_peer_connection_t *pc, void *data)
{
    pg_choice_t  *choice = data;
    pg_peer_t    *peer;

    if (choice->tries_made++ > 0) {
        choice->index = (choice->index + 1) % choice->peers->count;  /* the next endpoint after a failed try */
    }
    peer = &choice->peers->peers[choice->index];
    pc->sockaddr = peer->sockaddr;
    pc->socklen = peer->socklen;
    pc->name = &peer->name;
    pc->cached = 0;
    pc->connection = NULL;
    return NGX_OK;
}


static void
pg_free_peer(ngx_peer_connection_t *pc, void *data, ngx_uint_t state)
{
    if (pc->tries) {
        pc->tries--;
    }
}


#if (NGX_HTTP_SSL)

/* No TLS session is reused, as with balancer_by_lua's peers: a session must not pass between profiles that verify
 * backends differently. */
static ngx_int_t
pg_set_session(ngx_peer_connection_t *pc, void *data)
{
    return NGX_OK;
}


static void
pg_save_session(ngx_peer_connection_t *pc, void *data)
{
}

#endif


static ngx_int_t
pg_init_peer(ngx_http_request_t *r, ngx_http_upstream_srv_conf_t *us)
{
    pg_choice_t         *choice;
    pg_upstream_conf_t  *ucf;

    choice = pg_choice_of(r);
    if (choice == NULL) {
        ucf = ngx_http_conf_upstream_srv_conf(us, ngx_http_pyngress_module);
        return ucf->original_init_peer(r, us);
    }
    choice->used = 1;
    if (choice->measure_ewma && ngx_http_pyngress_ewma_measure(r) != 0) {
        return NGX_ERROR;
    }
    r->upstream->peer.data = choice;
    r->upstream->peer.get = pg_get_peer;
    r->upstream->peer.free = pg_free_peer;
    r->upstream->peer.tries = choice->peers->count;
#if (NGX_HTTP_SSL)
    r->upstream->peer.set_session = pg_set_session;
    r->upstream->peer.save_session = pg_save_session;
#endif
    return NGX_OK;
}


static ngx_int_t
pg_init_upstream(ngx_conf_t *cf, ngx_http_upstream_srv_conf_t *us)
{
    pg_upstream_conf_t  *ucf = ngx_http_conf_upstream_srv_conf(us, ngx_http_pyngress_module);

    if (ucf->original_init_upstream(cf, us) != NGX_OK) {
        return NGX_ERROR;
    }
    ucf->original_init_peer = us->peer.init;
    us->peer.init = pg_init_peer;
    return NGX_OK;
}


/* pyngress_balancer, after balancer_by_lua (which balances what the router does not hand over) and before keepalive
 * (which keeps the connections of both). */
char *
ngx_http_pyngress_balancer(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    pg_upstream_conf_t            *ucf = conf;
    ngx_http_upstream_srv_conf_t  *uscf;

    uscf = ngx_http_conf_get_module_srv_conf(cf, ngx_http_upstream_module);
    if (ucf->original_init_upstream != NULL) {
        return "is duplicate";
    }
    if (uscf->peer.init_upstream == NULL) {
        return "must follow balancer_by_lua, which balances the requests the router does not hand over";
    }
    ucf->original_init_upstream = uscf->peer.init_upstream;
    uscf->peer.init_upstream = pg_init_upstream;
    return NGX_CONF_OK;
}
