import net from "node:net";

/**
 * A TCP proxy in the test process between the workers and Redis, or between Redis nodes: it can cut every
 * open connection at once (as a flaky network or a load balancer would), refuse new ones for a while, and
 * hold back what goes through it (a link that stalls; a cut then drops what it held).
 */
export class TcpProxy {
  readonly #server: net.Server;
  readonly #targetPort: number;
  readonly #pairs = new Set<Pair>();
  #refusing = false;
  #holding = false;
  /** Connections accepted since start. */
  accepted = 0;
  /** Connections destroyed by `cut()`. */
  severed = 0;

  private constructor(server: net.Server, targetPort: number) {
    this.#server = server;
    this.#targetPort = targetPort;
  }

  /** Listens on a free port of 127.0.0.1 and forwards to `targetPort` there. */
  static async start(targetPort: number): Promise<TcpProxy> {
    const server = net.createServer();
    const proxy = new TcpProxy(server, targetPort);
    server.on("connection", (client) => proxy.#accept(client));
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen({ host: "127.0.0.1", port: 0 }, () => resolve());
    });
    return proxy;
  }

  get port(): number {
    return (this.#server.address() as net.AddressInfo).port;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** How many connections are open right now. */
  get open(): number {
    return this.#pairs.size;
  }

  /** Destroys every open connection, both sides; returns how many. */
  cut(): number {
    const pairs = [...this.#pairs];
    for (const pair of pairs) {
      pair.client.destroy();
      pair.upstream.destroy();
    }
    this.#pairs.clear();
    this.severed += pairs.length;
    return pairs.length;
  }

  /** While refusing, new connections are closed at once (the clients retry with their backoff). */
  refuse(refusing: boolean): void {
    this.#refusing = refusing;
  }

  /**
   * While holding, nothing is forwarded either way: what each side sends waits in the proxy (and then in
   * the kernel's buffers), as on a link that stalls. Released, it flows on; cut, it is gone.
   */
  hold(holding: boolean): void {
    if (holding === this.#holding) return;
    this.#holding = holding;
    for (const pair of this.#pairs) {
      if (holding) unlink(pair);
      else link(pair);
    }
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #accept(client: net.Socket): void {
    if (this.#refusing) {
      client.destroy();
      return;
    }
    this.accepted += 1;
    const upstream = net.connect({ host: "127.0.0.1", port: this.#targetPort });
    const pair = { client, upstream };
    this.#pairs.add(pair);
    const close = () => {
      this.#pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    client.on("error", close);
    upstream.on("error", close);
    client.on("close", close);
    upstream.on("close", close);
    if (!this.#holding) link(pair);
  }
}

type Pair = { client: net.Socket; upstream: net.Socket };

function link({ client, upstream }: Pair): void {
  client.pipe(upstream);
  upstream.pipe(client);
}

function unlink({ client, upstream }: Pair): void {
  client.unpipe(upstream);
  upstream.unpipe(client);
  // Unpiped, a stream stays in flowing mode with no reader: paused, it keeps what comes in.
  client.pause();
  upstream.pause();
}

/**
 * One TcpProxy per Redis node, for one side of the run (the workers, the orchestrator): the faults cut and
 * refuse them all at once, and `natMap` tells a Sentinel or Cluster client to reach each node through its
 * proxy, wherever the primary has moved.
 */
export class ProxyGroup {
  readonly #byNode: ReadonlyMap<number, TcpProxy>;
  readonly #announced: ReadonlyMap<number, number>;

  private constructor(byNode: ReadonlyMap<number, TcpProxy>, announced: ReadonlyMap<number, number>) {
    this.#byNode = byNode;
    this.#announced = announced;
  }

  /**
   * A proxy for each node (on 127.0.0.1), to its own `port`, for the clients that Redis tells of the node
   * by its `announced` port.
   */
  static async start(nodes: readonly { port: number; announced: number }[]): Promise<ProxyGroup> {
    const byNode = new Map<number, TcpProxy>();
    try {
      for (const node of nodes) byNode.set(node.port, await TcpProxy.start(node.port));
    } catch (error) {
      await Promise.all([...byNode.values()].map((proxy) => proxy.close()));
      throw error;
    }
    return new ProxyGroup(byNode, new Map(nodes.map((node) => [node.port, node.announced])));
  }

  /** The proxy in front of the node on `nodePort`. */
  proxyOf(nodePort: number): TcpProxy {
    const proxy = this.#byNode.get(nodePort);
    if (!proxy) throw new Error(`no proxy for the node on port ${nodePort}`);
    return proxy;
  }

  /** `127.0.0.1:<announced port>` → the address of the node's proxy: ioredis' `natMap`. */
  get natMap(): Record<string, { host: string; port: number }> {
    return Object.fromEntries(
      [...this.#byNode].map(([node, proxy]) => [
        `127.0.0.1:${this.#announced.get(node) ?? node}`,
        { host: "127.0.0.1", port: proxy.port },
      ]),
    );
  }

  /** Cuts every open connection through every proxy; returns how many. */
  cut(): number {
    return [...this.#byNode.values()].reduce((severed, proxy) => severed + proxy.cut(), 0);
  }

  refuse(refusing: boolean): void {
    for (const proxy of this.#byNode.values()) proxy.refuse(refusing);
  }

  async close(): Promise<void> {
    await Promise.all([...this.#byNode.values()].map((proxy) => proxy.close()));
  }
}
