// TCP and UDP services (--tcp/udp-services-configmap): the endpoint each new connection (each new UDP
// client) goes to, in nginx's stream block: `js_set $pyngress_stream_peer pyngress_stream.peer`.
//
// The endpoints are a JSON file the syncer replaces (by rename) when they change: {"<backend>": ["ip:port",
// ...]}. It is read per connection (njs keeps no state between sessions), so endpoints move without a
// reload. A backend without endpoints gives no peer: nginx closes the connection.
var fs = require('fs');

function peer(s) {
    var table;
    try {
        table = JSON.parse(fs.readFileSync(s.variables.pyngress_stream_endpoints, 'utf8'));
    } catch (e) {
        s.error('stream endpoints unreadable: ' + e.message);
        return '';
    }
    var backend = s.variables.proxy_upstream_name;
    var endpoints = table[backend] || [];
    if (endpoints.length === 0) {
        s.warn('service ' + backend + ' has no endpoints: connection closed');
        return '';
    }
    return endpoints[Math.floor(Math.random() * endpoints.length)];
}

export default { peer };
