// Temporary runner for the view-model fan-out benchmark until `sugar-bench fanout W E` wires it in.
// Usage: fanout-bench [WATCHERS] [EMISSIONS] [coalesced|immediate]
import HealthDataSync
import JSON
import ViewModelBenchmarks

let arguments = CommandLine.arguments.dropFirst()
let values = arguments.prefix(2).compactMap { Int($0) }
let watchers = values.first ?? 1_000
let emissions = values.count > 1 ? values[1] : 10_000
let policy = arguments.dropFirst(2).first.flatMap(WatchPolicy.init(rawValue:)) ?? .coalesced
let result = await FanoutBenchmark.run(watchers: watchers, emissions: emissions, policy: policy)
print(result.prettySerialized())
