import Glibc

/// This host's name, lower-case; nil when it has none (the programs' default gateway id and client
/// id are made from it).
public func processHostName() -> String? {
    var buffer = [CChar](repeating: 0, count: 256)
    guard gethostname(&buffer, buffer.count - 1) == 0 else { return nil }
    let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self).lowercased()
    return name.isEmpty ? nil : name
}
